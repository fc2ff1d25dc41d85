#include "src/bootstrap/auth.h"

#include <sodium.h>

#include <cstdlib>
#include <cstring>
#include <mutex>

#include "src/core/log.h"
#include "src/core/param.h"

namespace tempo::bootstrap {
namespace {

void ensureSodium() {
  static std::once_flag once;
  std::call_once(once, [] {
    if (sodium_init() < 0) {
      TEMPO_WARN("bootstrap: libsodium failed to initialise; cannot authenticate connections");
      std::abort();  // no safe way on: every proof would be predictable
    }
  });
}

}  // namespace

Nonce freshNonce() {
  ensureSodium();
  Nonce n;
  randombytes_buf(n.data(), n.size());
  return n;
}

Digest bodyDigest(std::span<const uint8_t> payload) {
  ensureSodium();
  Digest d{};
  const size_t body = payload.size() >= kProofBytes ? payload.size() - kProofBytes : 0;
  crypto_hash_sha256(d.data(), payload.data(), body);
  return d;
}

Proof prove(const Secret& secret, ProofLabel label, std::span<const uint8_t> context, const Digest& digest) {
  ensureSodium();
  static_assert(crypto_auth_hmacsha256_BYTES == kProofBytes);
  crypto_auth_hmacsha256_state st;
  crypto_auth_hmacsha256_init(&st, secret.data(), secret.size());
  const uint8_t tag[8] = {'t', 'e', 'm', 'p', 'o', '/', uint8_t(kProtocolVersion), uint8_t(label)};
  crypto_auth_hmacsha256_update(&st, tag, sizeof tag);
  const uint8_t contextLen = uint8_t(context.size());
  crypto_auth_hmacsha256_update(&st, &contextLen, 1);
  crypto_auth_hmacsha256_update(&st, context.data(), context.size());
  crypto_auth_hmacsha256_update(&st, digest.data(), digest.size());
  Proof p;
  crypto_auth_hmacsha256_final(&st, p.data());
  sodium_memzero(&st, sizeof st);
  return p;
}

void seal(std::vector<uint8_t>& msg, const Secret& secret, ProofLabel label, std::span<const uint8_t> context) {
  const std::span<const uint8_t> payload = std::span<const uint8_t>(msg).subspan(kHeaderBytes);
  const Proof p = prove(secret, label, context, bodyDigest(payload));
  memcpy(msg.data() + msg.size() - kProofBytes, p.data(), kProofBytes);
}

bool verifySealed(std::span<const uint8_t> payload, const Secret& secret, ProofLabel label,
                  std::span<const uint8_t> context) {
  if (payload.size() < kProofBytes) return false;
  const Proof want = prove(secret, label, context, bodyDigest(payload));
  return sodium_memcmp(want.data(), payload.data() + payload.size() - kProofBytes, kProofBytes) == 0;
}

Secret commIdSecret() {
  Secret s{};
  const char* text = param::Secret();
  if (!*text) return s;
  ensureSodium();
  crypto_hash_sha256(s.data(), reinterpret_cast<const uint8_t*>(text), strlen(text));
  return s;
}

}  // namespace tempo::bootstrap
