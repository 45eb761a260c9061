from testbed.cli import console

console()
