// CRC-32C (Castagnoli), the checksum of iSCSI, ext4 and SCTP: what transports/framed
// stamps on every message when TEMPO_CHECKSUM is on.
//
// crc32c(p, n) is the standard CRC-32C of the n bytes (crc32c("123456789") == 0xE3069283);
// crc32c(p2, n2, crc32c(p1, n1)) continues a running checksum over p1 then p2. Uses the
// SSE4.2 instruction where the CPU has it (three streams at once over long inputs), a
// table elsewhere; both give the same value.
#pragma once

#include <cstddef>
#include <cstdint>

namespace tempo {

uint32_t crc32c(const void* data, size_t n, uint32_t crc = 0);

}  // namespace tempo
