// Identity of this host and process, as exchanged during bootstrap.
#pragma once

#include <cstdint>

namespace tempo {

// The host name this process reports: TEMPO_HOSTNAME when set, else gethostname()
// truncated at the first '.'. Stable for the life of the process.
const char* hostName();
// Hash identifying this host: the host name plus the kernel boot id (NCCL's hostHash),
// or the TEMPO_HOSTNAME value alone when that is set.
uint64_t hostHash();
// Hash of the running kernel's boot id alone: ranks with equal values share this machine's
// cores even when TEMPO_HOSTNAME (or a network namespace) makes them different hosts.
uint64_t kernelHash();
// Random 64-bit value drawn once per process: ranks with equal values share an address
// space (and can use the loopback transport).
uint64_t processToken();
// 64-bit FNV-1a, used for the hashes above and for communicator identities.
uint64_t fnv1a(const void* data, uint64_t len, uint64_t seed = 0xcbf29ce484222325ull);
// Fills `out` from the kernel's CSPRNG (getrandom). Returns false only if that fails.
bool secureRandom(void* out, uint64_t len);

}  // namespace tempo
