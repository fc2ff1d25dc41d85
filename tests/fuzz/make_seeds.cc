// Writes the seed corpus of the fuzz targets (tests/fuzz/corpus/<target>/), from the
// encoders themselves: one well-formed input per message kind and id flavour, and a few
// host:port texts. Run it again when a wire format changes:
//   build/tests/fuzz/fuzz_seeds tests/fuzz/corpus
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <string>
#include <vector>

#include "src/bootstrap/wire.h"

using namespace tempo::bootstrap;

namespace {

void write(const std::filesystem::path& dir, const std::string& name, const void* data, size_t size) {
  std::filesystem::create_directories(dir);
  std::ofstream(dir / name, std::ios::binary).write(static_cast<const char*>(data), std::streamsize(size));
}
void write(const std::filesystem::path& dir, const std::string& name, const std::vector<uint8_t>& bytes) {
  write(dir, name, bytes.data(), bytes.size());
}

SockAddr addr(const char* text) { return SockAddr::parse(text).value(); }

}  // namespace

int main(int argc, char** argv) {
  if (argc != 2) {
    fprintf(stderr, "usage: %s <corpus dir>\n", argv[0]);
    return 2;
  }
  const std::filesystem::path root = argv[1];

  // Unique ids: with a secret over IPv4 and IPv6, and an NCCL_COMM_ID one without.
  for (const char* a : {"10.0.0.1:29500", "[fd00::17]:6000"}) {
    UniqueId id;
    id.root = addr(a);
    for (size_t i = 0; i < id.secret.size(); ++i) id.secret[i] = uint8_t(i * 37 + 11);
    uint8_t raw[kUniqueIdBytes];
    encodeUniqueId(id, raw);
    write(root / "unique_id", std::string("id_") + (a[0] == '[' ? "ipv6" : "ipv4"), raw, sizeof raw);
  }
  UniqueId commId;
  commId.root = addr("127.0.0.1:1234");
  commId.flags = UniqueId::kNoSecret;
  uint8_t raw[kUniqueIdBytes];
  encodeUniqueId(commId, raw);
  write(root / "unique_id", "id_comm_id", raw, sizeof raw);

  // Framed messages.
  const std::filesystem::path frame = root / "frame";
  Hello hello;
  hello.nranks = 4;
  hello.rank = 2;
  hello.info.oob = addr("192.168.1.5:40000");
  hello.info.features = kFeatureTelemetry;
  snprintf(hello.info.hostname, sizeof hello.info.hostname, "node02");
  write(frame, "hello", encodeHello(hello));
  Table table;
  table.commNonce = 0x1234;
  table.peers.assign(3, hello.info);
  write(frame, "table", encodeTable(table));
  write(frame, "error", encodeError({4, "rank 7 is outside [0, 4)"}));
  write(frame, "abort", encodeAbort({6, "rank 1 aborted"}));
  PeerHello peer;
  peer.commNonce = 0x1234;
  peer.from = 1;
  peer.purpose = PeerHello::kDirect;
  write(frame, "peer_hello", encodePeerHello(peer));
  write(frame, "leave", encodeLeave(42));
  write(frame, "challenge", encodeChallenge(Nonce{1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15, 16}));
  const std::vector<uint8_t> direct = {9, 8, 7};
  write(frame, "direct", encodeDirect(direct));
  write(frame, "keepalive", encodeKeepalive());

  // host:port texts.
  int n = 0;
  for (const char* text : {"127.0.0.1:29500", "[::1]:6000", "localhost:80", "10.1.2.3", "[fe80::1%eth0]:1"})
    write(root / "sockaddr", "text" + std::to_string(n++), text, strlen(text));
  printf("seeds written under %s\n", root.c_str());
  return 0;
}
