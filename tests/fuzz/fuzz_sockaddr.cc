// Fuzz target: the host:port parser behind NCCL_COMM_ID and MASTER_ADDR/MASTER_PORT.
// Property: no text crashes it or trips a sanitizer, and an address that parses prints as
// text that parses back to the same address. Numeric hosts only: a name would go to the
// resolver, which is slow and, without a network, may not answer at all.
#include <cstdint>
#include <cstdlib>
#include <string>

#include "src/bootstrap/socket.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  using tempo::bootstrap::SockAddr;
  tempo::Result<SockAddr> a = SockAddr::parse(std::string(reinterpret_cast<const char*>(data), size), true);
  if (!a.ok()) return 0;
  const std::string text = a->toString();
  tempo::Result<SockAddr> b = SockAddr::parse(text, true);
  if (!b.ok() || b->toString() != text) abort();
  return 0;
}
