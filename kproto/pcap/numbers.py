"""Numbers a capture file and its TCP headers are written in, shared by the writer
(:mod:`kproto.pcap.writer`) and the reader (:mod:`kproto.capture.packets`).

Link types are the tcpdump.org LINKTYPE_ values a pcap header or pcapng interface block names; TCP
flags are the bits of the TCP header's flags byte.
"""

__all__ = [
    "TCP_FIN",
    "TCP_SYN",
    "TCP_RST",
    "TCP_PSH",
    "TCP_ACK",
    "LINKTYPE_NULL",
    "LINKTYPE_ETHERNET",
    "LINKTYPE_RAW",
    "LINKTYPE_LOOP",
    "LINKTYPE_LINUX_SLL",
    "LINKTYPE_IPV4",
    "LINKTYPE_IPV6",
    "LINKTYPE_LINUX_SLL2",
]

TCP_FIN = 0x01
TCP_SYN = 0x02
TCP_RST = 0x04
TCP_PSH = 0x08
TCP_ACK = 0x10

LINKTYPE_NULL = 0
LINKTYPE_ETHERNET = 1
LINKTYPE_RAW = 101
LINKTYPE_LOOP = 108
LINKTYPE_LINUX_SLL = 113
LINKTYPE_IPV4 = 228
LINKTYPE_IPV6 = 229
LINKTYPE_LINUX_SLL2 = 276
