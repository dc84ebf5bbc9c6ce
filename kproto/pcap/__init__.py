"""The pcap and pcapng formats as kproto writes them: below both :mod:`kproto.capture` (which reads
captures) and :mod:`kproto.broker` (which records its traffic), so neither has to import the other.

* :mod:`kproto.pcap.numbers`: link-type numbers and TCP flag bits, shared by reader and writer;
* :mod:`kproto.pcap.writer`: TCP conversations → pcap/pcapng files.

Nothing here imports the rest of kproto.
"""
