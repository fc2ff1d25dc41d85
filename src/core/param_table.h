// The one table of every environment variable Tempo reads (DESIGN.md section 4).
//
// TEMPO_PARAM(Ident, "ENV_NAME", Kind, "default", "description")
//   Kind is Int (parsed as a signed 64-bit integer, decimal or 0x-hex) or Str.
// Names follow NCCL/RCCL where the meaning matches, TEMPO_ for Tempo's own. Nothing
// outside src/core/param.cc calls getenv. Each entry becomes an accessor
// tempo::param::Ident() returning int64_t or const char*.
//
// Keep this list sorted by area; the README's environment table is generated from the
// same descriptions (tools/tempo-params --markdown).

// ---- logging ----
TEMPO_PARAM(Debug, "NCCL_DEBUG", Str, "ERROR",
            "log level: NONE, VERSION, ERROR, WARN, INFO, ABORT, TRACE")
TEMPO_PARAM(DebugSubsys, "NCCL_DEBUG_SUBSYS", Str, "INIT,BOOTSTRAP,ENV",
            "comma list of subsystems to log at INFO (INIT, COLL, P2P, NET, TUNING, ENV, ALLOC, "
            "CALL, BOOTSTRAP, ...; ALL; ^ excludes)")
TEMPO_PARAM(DebugFile, "NCCL_DEBUG_FILE", Str, "",
            "write the log to this file instead of stderr; %h expands to the host name, %p to the pid")
TEMPO_PARAM(DebugTimestampLevels, "NCCL_DEBUG_TIMESTAMP_LEVELS", Str, "WARN",
            "levels whose lines carry a timestamp (comma list, ALL, or ^ to exclude)")
TEMPO_PARAM(DebugTimestampFormat, "NCCL_DEBUG_TIMESTAMP_FORMAT", Str, "[%F %T] ",
            "strftime format of the timestamp")
TEMPO_PARAM(ConfFile, "NCCL_CONF_FILE", Str, "",
            "file of KEY=VALUE lines read before ~/.rccl.conf and /etc/rccl.conf; the environment wins")

// ---- bootstrap ----
TEMPO_PARAM(CommId, "NCCL_COMM_ID", Str, "",
            "host:port of the bootstrap root; rank 0 listens there and no unique id needs to be shared")
TEMPO_PARAM(Secret, "TEMPO_SECRET", Str, "",
            "NCCL_COMM_ID jobs only, whose id carries no secret: a passphrase every rank sets alike; connections "
            "prove they know it (its SHA-256) by HMAC and never send it. Unset, anyone who reaches the root's "
            "port can join, as with NCCL. Never shown by tempo-params or in logs")
TEMPO_PARAM(SocketIfname, "NCCL_SOCKET_IFNAME", Str, "",
            "interfaces for bootstrap sockets: prefix list, ^ excludes, = exact (default: ^lo,docker, "
            "then lo)")
TEMPO_PARAM(SocketFamily, "NCCL_SOCKET_FAMILY", Str, "",
            "AF_INET or AF_INET6 to restrict the bootstrap address family")
TEMPO_PARAM(InitTimeout, "TEMPO_INIT_TIMEOUT", Int, "300",
            "seconds any wait during communicator initialisation may take before ncclSystemError")
TEMPO_PARAM(PeerTimeout, "TEMPO_PEER_TIMEOUT", Int, "30",
            "seconds a ring neighbour may go without a heartbeat (one a second, or every quarter of this) "
            "before this rank's calls fail with ncclRemoteError: a stopped, hung or unreachable process. "
            "During init it also bounds the root's wait on a joined rank's keepalives and a joining rank's "
            "wait on the root's challenge and keepalives (0: beats are sent but never judged)")
TEMPO_PARAM(HandshakeTimeout, "TEMPO_HANDSHAKE_TIMEOUT", Int, "5",
            "seconds an incoming bootstrap connection has to prove the job secret")
TEMPO_PARAM(Hostname, "TEMPO_HOSTNAME", Str, "",
            "host name this process reports (lets one machine play several hosts)")

// ---- device buffers ----
TEMPO_PARAM(Gpu, "TEMPO_GPU", Str, "auto",
            "GPU runtime for device buffers: auto (load libtempo-gpu-hip.so or libtempo-gpu-cuda.so "
            "from the library's directory where /dev/kfd or /dev/nvidiactl exists), off (host "
            "memory only), or the path of a plugin")
TEMPO_PARAM(GpuPipeline, "TEMPO_GPU_PIPELINE", Int, "1",
            "calls on device buffers: 1 runs them on the buffers themselves, chunk by chunk through "
            "pinned slots, with reductions by the device's kernels (PreMulSum and AllReduceWithBias "
            "calls excepted); 0 runs every call on whole host copies of its buffers")

// ---- transports ----
TEMPO_PARAM(Transport, "TEMPO_TRANSPORT", Str, "auto",
            "data transport: auto (loopback inside a process, Tempo's shm between processes of one host; "
            "across hosts libfabric when FI_PROVIDER is set, UCX when UCX_TLS or UCX_NET_DEVICES is, else "
            "TEMPO_NET_DEFAULT), shm (Tempo's shm for every peer, which must share this host), ofi "
            "(libfabric for every peer: shm on one host, tcp across hosts), ucx (UCX for every peer, over "
            "the transports UCX selects), loopback")
TEMPO_PARAM(NetDefault, "TEMPO_NET_DEFAULT", Str, "auto",
            "TEMPO_TRANSPORT=auto's choice for peers on other hosts when neither FI_PROVIDER nor UCX_TLS/"
            "UCX_NET_DEVICES names one: auto (UCX for messages below TEMPO_NET_LARGE_BYTES and for "
            "point-to-point calls, libfabric tcp for larger collective messages; where only one of the two "
            "is built, that one), ucx, or ofi (libfabric tcp)")
TEMPO_PARAM(NetLargeBytes, "TEMPO_NET_LARGE_BYTES", Int, "262144",
            "TEMPO_NET_DEFAULT=auto: collective messages between hosts of at least this many bytes travel "
            "over libfabric tcp, shorter ones over UCX")
TEMPO_PARAM(ShmEager, "TEMPO_SHM_EAGER", Int, "-1",
            "Tempo's shm: messages up to this many bytes (at most 131008) travel inline through the "
            "shared ring, copied in by the sender and out by the receiver; larger ones are announced and "
            "then pulled or streamed (TEMPO_SHM_CMA) (-1: 65536)")
TEMPO_PARAM(ShmSplit, "TEMPO_SHM_SPLIT", Int, "262144",
            "Tempo's shm: a message pulled by cross-memory attach of at least this many bytes is moved by "
            "both processes at once, the receiver reading one half while the sender writes the other (0: off)")
TEMPO_PARAM(ShmCma, "TEMPO_SHM_CMA", Int, "-1",
            "Tempo's shm: 1 moves messages over TEMPO_SHM_EAGER bytes with one copy by cross-memory "
            "attach (process_vm_readv) where the kernel allows it; 0 streams them through the shared rings; "
            "2 lets each receiver time both ways per peer and size class and use the faster, trying the "
            "other every 16th-64th message; -1 is 2 where every local rank has a core and 0 where local "
            "ranks outnumber cores")
TEMPO_PARAM(FiProvider, "FI_PROVIDER", Str, "",
            "libfabric provider for every peer (passed through to libfabric); default: shm on one "
            "host, tcp across hosts")
TEMPO_PARAM(UcxTls, "UCX_TLS", Str, "",
            "UCX transports (passed through to UCX, which reads it); when set, TEMPO_TRANSPORT=auto uses UCX "
            "for peers on other hosts")
TEMPO_PARAM(UcxNetDevices, "UCX_NET_DEVICES", Str, "",
            "UCX network devices (passed through to UCX); when set, TEMPO_TRANSPORT=auto uses UCX for peers "
            "on other hosts")
TEMPO_PARAM(FiShmDisableCma, "FI_SHM_DISABLE_CMA", Str, "1",
            "libfabric shm: 1 copies through shared buffers, 0 uses cross-memory attach; Tempo "
            "defaults to 1 (libfabric: 0) because page pinning made CMA slower on the VMs measured")
TEMPO_PARAM(FiOfiRxmUseSrx, "FI_OFI_RXM_USE_SRX", Str, "0",
            "libfabric tcp;ofi_rxm: 1 shares one pool of receive buffers per endpoint, 0 gives each "
            "connection its own; Tempo defaults to 0 (libfabric: 1 for tcp) because the shared pool costs "
            "about 70 MB per endpoint as it opens, and a failed communicator's tcp endpoints are kept open "
            "until the process exits (closing them after a peer died crashed libfabric 1.17)")
TEMPO_PARAM(Checksum, "TEMPO_CHECKSUM", Int, "0",
            "1: every data message carries a header with its sequence number, length and CRC-32C, checked "
            "on receipt; a message that fails the check fails its collective with ncclSystemError on every "
            "rank. Costs a checksum pass over every byte sent and received; on whenever TEMPO_FAULT is set")
TEMPO_PARAM(Fault, "TEMPO_FAULT", Str, "",
            "fault injection, for testing: comma-separated faults applied to every data message a rank "
            "sends, each a probability or a time: corrupt=P (flip one bit), drop=P, dup=P (deliver twice), "
            "reorder=P (let later messages overtake it), delay=US, jitter=US (extra uniform delay), seed=N")

// ---- topology ----
TEMPO_PARAM(TopoFile, "TEMPO_TOPO_FILE", Str, "",
            "switch map in Slurm's topology.conf format (SwitchName= Nodes= Switches=, hostlists such as "
            "node[01-16]); ranks are placed by host name (TEMPO_HOSTNAME overrides it per process)")
TEMPO_PARAM(TopoXml, "TEMPO_TOPO_XML", Str, "",
            "a hwloc XML export to use instead of discovering this machine (hwloc's own HWLOC_XMLFILE "
            "works too)")
TEMPO_PARAM(TopoDumpFile, "TEMPO_TOPO_DUMP_FILE", Str, "",
            "rank 0 of each communicator writes the job's topology here at init (the switch map and each "
            "rank's host; tempo-topo --load reads it back)")
TEMPO_PARAM(Nic, "TEMPO_NIC", Str, "auto",
            "network device the transports use between hosts: auto (found by hwloc: an RDMA NIC first, "
            "one on the NUMA node of the rank's CPU binding first), any (libfabric and UCX choose), or a "
            "device name (eth0, mlx5_0); UCX_NET_DEVICES and FI_TCP_IFACE, where set, win")
TEMPO_PARAM(RingOrder, "TEMPO_RING_ORDER", Str, "topology",
            "ring layout: topology (ranks on one NUMA node, then one host, then one leaf switch, then each "
            "higher switch, contiguous, so the ring crosses each boundary the fewest times) or rank (rank order)")

// ---- engine, algorithms ----
TEMPO_PARAM(CheckMismatch, "TEMPO_CHECK_MISMATCH", Int, "1",
            "1: every collective exchanges a fingerprint (collective, count, datatype, op, root, sequence) in "
            "ceil(log2 n) rounds and completes only when every rank's matches; a mismatch fails that collective "
            "with ncclInvalidUsage on every rank; 0: off")
TEMPO_PARAM(Algo, "TEMPO_ALGO", Str, "auto",
            "all-reduce algorithm: auto (chosen per size by the tuner), ring, rd (recursive "
            "doubling), direct (one-shot: every rank sends to every rank), tree (double binary tree, "
            "pipelined) or hier (reduce onto each host's leader, all-reduce among leaders by recursive "
            "doubling, double binary tree or ring as the cost model chooses, broadcast on each host; "
            "hier/rd, hier/tree and hier/ring name the leaders' algorithm)")
TEMPO_PARAM(NcclAlgo, "NCCL_ALGO", Str, "",
            "all-reduce algorithms allowed, as NCCL: Ring, Tree (Tempo's hierarchical all-reduce with a "
            "tree among the hosts' leaders), a comma list, or ^ to exclude; TEMPO_ALGO wins when set")
TEMPO_PARAM(NetAlphaUs, "TEMPO_NET_ALPHA_US", Int, "0",
            "the tuner's cost model: microseconds per message between hosts (0: 30 over libfabric, 20 over "
            "UCX); every rank must give the same value")
TEMPO_PARAM(NetMbits, "TEMPO_NET_MBITS", Int, "0",
            "the tuner's cost model: each host's network bandwidth in Mbit/s (0: 10000); every rank must "
            "give the same value")
TEMPO_PARAM(MinNChannels, "NCCL_MIN_NCHANNELS", Int, "1",
            "fewest channels of the ring collectives (all-reduce, all-gather, reduce-scatter): each "
            "channel moves its part of the vector on a ring of its own (odd channels reversed), over its "
            "own NIC when TEMPO_NIC names several; every rank must give the same value")
TEMPO_PARAM(MaxNChannels, "NCCL_MAX_NCHANNELS", Int, "16",
            "most channels of the ring collectives; by default one per NIC (rail); every rank must give "
            "the same value")
TEMPO_PARAM(BcastAlgo, "TEMPO_BCAST_ALGO", Str, "auto",
            "broadcast algorithm: auto (chosen per size by the tuner), chain (pipelined down a chain "
            "of ranks) or tree (binomial tree, ceil(log2 n) hops)")
TEMPO_PARAM(ChunkSize, "TEMPO_CHUNK_SIZE", Int, "0",
            "bytes per pipelined ring step (0: chosen by the tuner)")
TEMPO_PARAM(P2pChunkSize, "TEMPO_P2P_CHUNK_SIZE", Int, "4194304",
            "point-to-point messages longer than this travel in pieces of this many bytes (so that "
            "device buffers stream through pinned slots); 0 sends every message whole; at least "
            "4096 otherwise; must be the same on every rank")
TEMPO_PARAM(BuffSize, "NCCL_BUFFSIZE", Int, "4194304",
            "staging bytes per communicator for in-place reductions")
TEMPO_PARAM(SpinUs, "TEMPO_SPIN_US", Int, "-1",
            "microseconds a waiting rank polls before it starts yielding the CPU (-1: 20, or 0 when "
            "a host has more ranks than cores)")
TEMPO_PARAM(YieldUs, "TEMPO_YIELD_US", Int, "2000",
            "microseconds a waiting rank yields between polls before it starts sleeping")
TEMPO_PARAM(CollTimeout, "TEMPO_COLL_TIMEOUT", Int, "0",
            "seconds a collective or point-to-point call may go unfinished after it starts before it "
            "fails with ncclTimeout on every rank (checked whenever its wait sees no progress for 20 ms; "
            "0: no limit)")

// ---- communicator config overrides (ncclConfig_t) ----
TEMPO_PARAM(CommBlocking, "NCCL_COMM_BLOCKING", Int, "-2147483648",
            "overrides ncclConfig_t.blocking when set (0 or 1)")
TEMPO_PARAM(CgaClusterSize, "NCCL_CGA_CLUSTER_SIZE", Int, "-2147483648",
            "overrides ncclConfig_t.cgaClusterSize (accepted; no effect on host memory)")
TEMPO_PARAM(MinCtas, "NCCL_MIN_CTAS", Int, "-2147483648",
            "overrides ncclConfig_t.minCTAs (accepted; no effect on host memory)")
TEMPO_PARAM(MaxCtas, "NCCL_MAX_CTAS", Int, "-2147483648",
            "overrides ncclConfig_t.maxCTAs (accepted; no effect on host memory)")
TEMPO_PARAM(NetName, "NCCL_NET", Str, "", "overrides ncclConfig_t.netName")

// ---- skew measurement and pacing (reference/pacing.md) ----
TEMPO_PARAM(Pacing, "TEMPO_PACING", Str, "observe",
            "off (no skew telemetry), observe (measure skew; tempoCommGetSkewStats) or on (also delay "
            "persistently early ranks when that pays); off must be set on every rank or none")
TEMPO_PARAM(PacingWindow, "TEMPO_PACING_WINDOW", Int, "32",
            "fewest collectives per telemetry window (a window also lasts at least 1/TEMPO_PACING_HZ)")
TEMPO_PARAM(PacingHz, "TEMPO_PACING_HZ", Int, "10",
            "most telemetry exchanges per second per communicator")
TEMPO_PARAM(PacingMinNodes, "TEMPO_PACING_MIN_NODES", Int, "8",
            "pacing engages only on communicators spanning at least this many hosts")
TEMPO_PARAM(PacingActuator, "TEMPO_PACING_ACTUATOR", Str, "gate",
            "how an engaged rank is paced: gate (hold the collective for its delay) or inject (start "
            "at once, spread its sends over the delay)")
TEMPO_PARAM(Trace, "TEMPO_TRACE", Str, "",
            "per-rank trace path pattern (%r rank, %h host, %p pid, %c communicator): writes P.json "
            "(Chrome trace, opens in Perfetto) and P.jsonl (one line per collective)")
