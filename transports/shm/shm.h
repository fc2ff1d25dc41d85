// Tempo's shared-memory transport between the processes (or threads) of one host.
//
// Each endpoint owns one POSIX shared-memory region holding an inbound ring per peer; a
// sender writes into the ring the receiver keeps for it, and rings the receiver's doorbell
// (a futex in the region) when the receiver sleeps. Messages up to TEMPO_SHM_EAGER bytes
// (64 KiB) travel inline in consecutive slots (eager: the sender copies in and is done, the
// receiver copies out); an arrival no receive has
// claimed is copied out of the ring only up to a bound, beyond which it waits in the ring
// and the full ring holds the sender back. Larger ones are announced (ready-to-send) and,
// once a receive matches, pulled by the receiver straight from the sender's buffer with
// process_vm_readv: one copy, made by the kernel, with no memory registration; from
// TEMPO_SHM_SPLIT bytes the sender writes the second half with process_vm_writev while the
// receiver pulls the first. Otherwise the receiver answers clear-to-send and the sender
// streams the data through the ring, so a large message never waits in shared memory for a
// receive that has not been posted. Which of the two is faster depends on the machine (a
// virtual machine's page pinning can make the kernel's one copy slower than two memcpys by
// two cores), so by default the receiver times both, per peer and size class, and uses the
// faster (mode_choice.h; TEMPO_SHM_CMA=2 forces this), except where local ranks outnumber
// cores, where it streams; TEMPO_SHM_CMA=1 always pulls, and where the kernel refuses
// cross-memory attach (ptrace policy, seccomp) or with TEMPO_SHM_CMA=0 the data is always
// streamed.
#pragma once

#include <cstdint>
#include <memory>

#include "transports/transport.h"

namespace tempo::transport::shm {

// Opens an endpoint for rank `rank` of `nranks`, its region sized for every rank. `peers`
// is how many peers will connect to it: once that many have mapped the region, its name is
// removed from /dev/shm, so nothing is left behind however the processes end.
Result<std::unique_ptr<Endpoint>> create(int rank, int nranks, int peers);

}  // namespace tempo::transport::shm
