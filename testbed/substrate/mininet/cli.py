"""``testbed net up FILE --switch lxbr|ovs``: the file's network built by Mininet and held in the
foreground with Mininet's own CLI, for users who know Mininet::

    mininet> rome ping -c 3 paris        # site names stand for sites; other names for their addresses
    mininet> pingall                     # every site to every other, over the shaped WAN links
    mininet> sites                       # site -> Mininet host, WAN and management addresses
    mininet> exit                        # (or Ctrl-D, or the end of piped input) tears it all down

Why in the foreground, unlike ``testbed net up`` without ``--switch`` (named namespaces that outlive
the command): a Mininet host is a shell (``mnexec``) whose pipes this process holds, so the network
lives exactly as long as it does. While it is held, ``testbed net status`` and
``testbed net exec SITE -- CMD`` work from another terminal.

A site name after the first word becomes the site's address (its loopback /32, reached over the
shaped WAN links): Mininet's own substitution would give the first interface's address, which here
is the management network's.
"""

from __future__ import annotations

import re
import sys

from mininet.cli import CLI
from mininet.log import output

_RECEIVED = re.compile(r"(\d+) (?:packets )?received")


class SiteCLI(CLI):
    """Mininet's CLI over a :class:`~testbed.substrate.mininet.fabric.MininetFabric`, by site name."""

    def __init__(self, fabric, stdin=sys.stdin, script: str | None = None):
        self.fabric = fabric  # set before CLI.__init__, which runs the command loop
        self._piped = not stdin.isatty()
        if self._piped:  # each command is echoed with its output instead (in order, whatever the buffering)
            self.prompt = ""
        super().__init__(fabric.net, stdin=stdin, script=script)

    def precmd(self, line: str) -> str:
        if self._piped and line.strip() and line != "EOF":
            output(f"mininet> {line.rstrip()}\n")
        return super().precmd(line)

    def _words(self, args: str) -> str:
        hosts = self.fabric.hosts
        return " ".join(self.fabric.site_addr(w) if w in hosts else w for w in args.split(" "))

    def default(self, line: str) -> None:
        first, args, line = self.parseline(line)
        host = self.fabric.hosts.get(first)
        if host is None:
            return super().default(line)  # Mininet's own node names still work
        if not args:
            output(f"*** Please enter a command for site {first}: {first} <cmd>\n")
            return None
        host.sendCmd(self._words(args))
        self.waitForNode(host)
        return None

    def waitForNode(self, node) -> None:  # noqa: N802 (Mininet's name)
        """Interactive: Mininet's (keystrokes go to the command). Piped input is left for the next
        commands instead of being fed to the running one."""
        if self.isatty():
            return super().waitForNode(node)
        output(node.waitOutput())
        return None

    def do_sites(self, _line: str) -> None:
        """List the sites: Mininet host, WAN address, management address."""
        for s in self.fabric.plan.sites:
            output(f"{s.name:<15} host {self.fabric.hosts[s.name].name:<16} addr {s.addr:<15} mgmt {s.mgmt_addr}\n")

    def do_pingall(self, line: str) -> None:
        """Ping between all sites over the WAN links (one packet each; ``pingall 3`` for three)."""
        count = int(line) if line.strip().isdigit() else 1
        sent = got = 0
        output("*** Ping: testing reachability between sites over the WAN links\n")
        for src, host in self.fabric.hosts.items():
            output(f"{src} -> ")
            for dst in self.fabric.hosts:
                if dst == src:
                    continue
                out = host.cmd(f"ping -c {count} -W 2 -q {self.fabric.site_addr(dst)}")
                m = _RECEIVED.search(out)
                n = int(m.group(1)) if m else 0
                sent, got = sent + count, got + n
                output(f"{dst} " if n else "X ")
            output("\n")
        lost = 100.0 * (sent - got) / sent if sent else 0.0
        output(f"*** Results: {lost:.0f}% dropped ({got}/{sent} received)\n")


def hold(plan, switch: str, *, stdin=sys.stdin) -> int:
    """Build ``plan`` with Mininet (management switch ``switch``), run the CLI until it exits, tear down."""
    from mininet.log import setLogLevel

    from testbed.substrate.mininet.fabric import MininetFabric

    setLogLevel("output")  # the CLI's output; the build's chatter stays quiet (fabric._quiet_mininet)
    fab = MininetFabric(plan, switch=switch, purpose="net")
    with fab:
        print(f"network {plan.run_id} up in {fab.up_s:.2f} s with Mininet ({len(plan.sites)} sites, "
              f"{len(plan.links)} links, impairment {plan.impairment}, switch {switch}); held until the CLI exits")
        first, last = plan.sites[0].name, plan.sites[-1].name
        print(f"  try: {first} ping -c 3 {last}   |   pingall   |   sites   |   exit")
        sys.stdout.flush()
        SiteCLI(fab, stdin=stdin)
    print(f"network {plan.run_id} down")
    return 0
