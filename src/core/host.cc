#include "src/core/host.h"

#include <sys/random.h>
#include <unistd.h>

#include <cerrno>
#include <cstdio>
#include <cstring>
#include <mutex>
#include <string>

#include "src/core/param.h"

namespace tempo {
namespace {

struct Identity {
  char name[256] = {};
  uint64_t hash = 0;
  uint64_t kernel = 0;
  uint64_t token = 0;
};

const Identity& identity() {
  static Identity id;
  static std::once_flag once;
  std::call_once(once, [] {
    std::string seed, boot;
    if (FILE* f = fopen("/proc/sys/kernel/random/boot_id", "r")) {
      char line[64] = {};
      if (fgets(line, sizeof line, f)) boot = line;
      fclose(f);
    }
    id.kernel = fnv1a(boot.data(), boot.size());
    const char* override = param::Hostname();
    if (*override) {
      snprintf(id.name, sizeof id.name, "%s", override);
      seed = override;
    } else {
      if (gethostname(id.name, sizeof id.name - 1) != 0) snprintf(id.name, sizeof id.name, "unknown");
      if (char* dot = strchr(id.name, '.')) *dot = '\0';
      seed = id.name + boot;
    }
    id.hash = fnv1a(seed.data(), seed.size());
    if (!secureRandom(&id.token, sizeof id.token)) id.token = uint64_t(getpid()) ^ id.hash;
  });
  return id;
}

}  // namespace

const char* hostName() { return identity().name; }
uint64_t hostHash() { return identity().hash; }
uint64_t kernelHash() { return identity().kernel; }
uint64_t processToken() { return identity().token; }

uint64_t fnv1a(const void* data, uint64_t len, uint64_t seed) {
  const auto* p = static_cast<const unsigned char*>(data);
  uint64_t h = seed;
  for (uint64_t i = 0; i < len; ++i) {
    h ^= p[i];
    h *= 0x100000001b3ull;
  }
  return h;
}

bool secureRandom(void* out, uint64_t len) {
  auto* p = static_cast<unsigned char*>(out);
  while (len > 0) {
    ssize_t n = getrandom(p, len, 0);
    if (n < 0) {
      if (errno == EINTR) continue;
      return false;
    }
    p += n;
    len -= uint64_t(n);
  }
  return true;
}

}  // namespace tempo
