"""A netem- and OVS-capable Debian guest under qemu, for the tests this host's kernel cannot run.

``testbed vm test`` builds (once, cached) a guest from Debian packages only, boots it in software
emulation, runs the tests marked ``netem``/``ovs`` inside it and reports their results here::

    from testbed.vm.run import run_guest_tests
    report = run_guest_tests()          # GuestReport: cases, measurements, timings
    report.ok                           # every guest test ran and passed (a skip is not ok)

Modules: ``image`` (inputs, cache, build), ``initramfs`` (boot scripts), ``kmod`` and ``cpio``
(pure helpers of the build), ``payload`` (what each boot carries in), ``guest`` (qemu),
``report`` (the guest's JUnit XML read back), ``run`` (all of it together).
"""
