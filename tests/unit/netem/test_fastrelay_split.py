"""The compiled relay's cutting of GSO super-frames into segments (per-segment loss and jitter), run
through its ``--split-test`` mode on frames built here: TCP and UDP over IPv4 and IPv6. Each message
it would send is checked field by field against what the kernel's own segmentation writes (lengths,
IPv4 id and header checksum, TCP sequence numbers and flags, UDP length, the pseudo-header sum the
kernel completes), and the payload of the kept segments only, in order. No privileges needed."""

from __future__ import annotations

import struct
import subprocess

import pytest

from testbed.netem.relay import fastrelay

pytestmark = pytest.mark.skipif(fastrelay.compiler() is None, reason="no C compiler")

VNET = struct.Struct("<BBHHHH")  # flags, gso_type, hdr_len, gso_size, csum_start, csum_offset
GSO_TCPV4, GSO_TCPV6, GSO_UDP_L4, NEEDS_CSUM = 1, 4, 5, 1
MSS, PAYLOAD = 1000, 5 * 1000 + 321  # six segments, the last one short
SEQ, IP_ID = 0xFFFFF000, 0xFFFE  # both wrap inside the frame


@pytest.fixture(scope="module")
def binary(tmp_path_factory):
    return fastrelay.build(tmp_path_factory.mktemp("fastrelay") / "fastrelay")


def _sum16(b: bytes) -> int:
    if len(b) % 2:
        b += b"\0"
    s = sum(struct.unpack(f"!{len(b) // 2}H", b))
    while s >> 16:
        s = (s & 0xFFFF) + (s >> 16)
    return s


def _frame(v6: bool, udp: bool) -> bytes:
    payload = bytes((i * 7 + 3) % 251 for i in range(PAYLOAD))
    l4 = (struct.pack("!HHHH", 4000, 5001, 0, 0) if udp else
          struct.pack("!HHIIBBHHH", 4000, 5001, SEQ, 77, 8 << 4, 0x80 | 0x18 | 0x01, 512, 0, 0) + b"\x01\x01\x08\x0a"
          + bytes(8))  # TCP with 12 bytes of options; CWR, PSH, ACK, FIN set
    proto = 17 if udp else 6
    if v6:
        ip = struct.pack("!IHBB", 6 << 28, len(l4) + PAYLOAD, proto, 64) + bytes(range(16)) + bytes(range(16, 32))
        eth = bytes(12) + b"\x86\xdd"
    else:
        ip = struct.pack("!BBHHHBBH4s4s", 0x45, 0, 0, IP_ID, 0x4000, 64, proto, 0, bytes([10, 0, 0, 1]),
                         bytes([10, 0, 0, 2]))
        eth = bytes(12) + b"\x08\x00"
    gso = GSO_UDP_L4 if udp else (GSO_TCPV6 if v6 else GSO_TCPV4)
    vnet = VNET.pack(NEEDS_CSUM, gso, 14 + len(ip) + len(l4), MSS, 14 + len(ip), 6 if udp else 16)
    return vnet + eth + ip + l4 + payload


def _split(binary, frame: bytes, kept: str) -> tuple[int, list[bytes]]:
    p = subprocess.run([str(binary), "--split-test", kept], input=frame, capture_output=True, timeout=10)
    out, msgs = p.stdout, []
    while out:
        (n,) = struct.unpack("=I", out[:4])
        msgs.append(out[4:4 + n])
        out = out[4 + n:]
    return p.returncode, msgs


@pytest.mark.parametrize("v6", [False, True], ids=["ipv4", "ipv6"])
@pytest.mark.parametrize("udp", [False, True], ids=["tcp", "udp"])
def test_kept_segments_go_out_with_the_headers_the_kernel_would_write(binary, v6, udp):
    frame = _frame(v6, udp)
    kept = "110101"  # runs [0, 2), [3], [5]: the last one short
    rc, msgs = _split(binary, frame, kept)
    assert rc == 0 and len(msgs) == 3
    l3 = 10 + 14
    ihl = 40 if v6 else 20
    thl = 8 if udp else 32
    payload = frame[l3 + ihl + thl:]
    runs = [(0, 2), (3, 4), (5, 6)]
    for msg, (i, j) in zip(msgs, runs):
        flags, gso_type, _, gso_size, csum_start, csum_offset = VNET.unpack(msg[:10])
        assert (csum_start, csum_offset) == (14 + ihl, 6 if udp else 16) and flags & NEEDS_CSUM
        if j - i == 1:
            assert (gso_type, gso_size) == (0, 0)  # one segment: an ordinary frame
        else:
            assert gso_size == MSS and gso_type == VNET.unpack(frame[:10])[1]
        ip, l4 = msg[l3:l3 + ihl], msg[l3 + ihl:]
        assert l4[thl:] == payload[i * MSS:j * MSS]
        if v6:
            assert struct.unpack("!H", ip[4:6])[0] == len(l4)
            pseudo = ip[8:40] + struct.pack("!IxxxB", len(l4), 17 if udp else 6)
        else:
            assert struct.unpack("!H", ip[2:4])[0] == ihl + len(l4)
            assert struct.unpack("!H", ip[4:6])[0] == (IP_ID + i) & 0xFFFF
            assert _sum16(ip) == 0xFFFF  # header checksum valid
            pseudo = ip[12:20] + struct.pack("!xBH", 17 if udp else 6, len(l4))
        # partial checksum: the folded pseudo-header sum for this message's length, completed by the kernel
        assert struct.unpack("!H", l4[csum_offset:csum_offset + 2])[0] == _sum16(pseudo)
        if udp:
            assert struct.unpack("!H", l4[4:6])[0] == len(l4)
        else:
            seq, tcp_flags = struct.unpack("!I", l4[4:8])[0], l4[13]
            assert seq == (SEQ + i * MSS) & 0xFFFFFFFF
            assert bool(tcp_flags & 0x80) == (i == 0)  # CWR on the first segment only
            assert bool(tcp_flags & 0x09) == (j == 6)  # FIN/PSH on the last only
            assert tcp_flags & 0x10  # ACK on all
        assert msg[10:l3] == frame[10:l3]  # Ethernet header as it was
        assert (ip[8:40] == frame[l3 + 8:l3 + 40]) if v6 else (ip[12:20] == frame[l3 + 12:l3 + 20])  # addresses


def test_all_kept_is_one_message_and_frames_it_cannot_cut_are_refused(binary):
    frame = _frame(False, False)
    rc, msgs = _split(binary, frame, "111111")
    assert rc == 0 and len(msgs) == 1 and msgs[0][10 + 14 + 20 + 32:] == frame[10 + 14 + 20 + 32:]
    v6 = bytearray(_frame(True, False))
    v6[10 + 14 + 6] = 0  # a hop-by-hop extension header first: not cut (whole-frame draws)
    assert _split(binary, bytes(v6), "101010")[0] == 3
