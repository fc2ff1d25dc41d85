#include "transports/framed/framed.h"

#include <cinttypes>
#include <cstddef>
#include <cstring>
#include <deque>
#include <vector>

#include "src/core/crc32c.h"
#include "src/core/log.h"
#include "transports/decorator.h"

namespace tempo::transport::framed {
namespace {

constexpr size_t kCoveredBytes = offsetof(Header, headerCrc);

// The sequence numbers seen from one peer: the highest, and which of the kWindow below it.
class SeenWindow {
 public:
  static constexpr uint64_t kWindow = 65536;

  // Success and records `seq` if it is new; otherwise why not.
  const char* admit(uint64_t seq) {
    if (seq == 0) return "sequence number 0 (no sender uses it)";
    if (bits_.empty()) bits_.assign(kWindow / 64, 0);
    if (seq > highest_) {
      // Forget the numbers that fall out of the window.
      const uint64_t step = seq - highest_;
      if (step >= kWindow) {
        std::fill(bits_.begin(), bits_.end(), 0);
      } else {
        for (uint64_t s = highest_ + 1; s <= seq; ++s) clear(s);
      }
      highest_ = seq;
      set(seq);
      return nullptr;
    }
    if (highest_ - seq >= kWindow) return "a sequence number older than the last 65,536 (a replayed message?)";
    if (test(seq)) return "a sequence number already received (a duplicated message)";
    set(seq);
    return nullptr;
  }

 private:
  void set(uint64_t s) { bits_[(s / 64) % bits_.size()] |= uint64_t(1) << (s % 64); }
  void clear(uint64_t s) { bits_[(s / 64) % bits_.size()] &= ~(uint64_t(1) << (s % 64)); }
  bool test(uint64_t s) const { return bits_[(s / 64) % bits_.size()] >> (s % 64) & 1; }

  uint64_t highest_ = 0;
  std::vector<uint64_t> bits_;  // allocated on the first message
};

// One user message in flight: its payload and header messages on the inner endpoint.
struct Frame {
  Request* user = nullptr;  // null once the user's request is completed
  bool send = false;
  int peer = 0;
  uint64_t tag = 0;
  void* buf = nullptr;
  bool dataPosted = false, headerPosted = false;
  Status failed = Status::Success;  // a post that failed
  Request data, header;
  Header h{};
};

class FramedEndpoint final : public Decorator {
 public:
  explicit FramedEndpoint(std::unique_ptr<Endpoint> inner) : Decorator(std::move(inner), "framed") {}
  ~FramedEndpoint() override { inner_.reset(); }  // before the frames whose requests it may hold

  Status isend(int peer, uint64_t tag, const void* buf, size_t len, Request* req) override {
    if (peer < 0) return fail(Status::InvalidArgument, "framed: send to rank %d", peer);
    if (nextSeq_.size() <= size_t(peer)) nextSeq_.resize(size_t(peer) + 1, 1);
    Frame* f = take(req, true, peer, tag, const_cast<void*>(buf));
    f->h = {kMagic, crc32c(buf, len), uint64_t(len), nextSeq_[size_t(peer)], tag, 0, 0};
    f->h.headerCrc = crc32c(&f->h, kCoveredBytes);
    const Status s = inner_->isend(peer, tag, buf, len, &f->data);
    if (!ok(s)) return giveBack(f, s);
    ++nextSeq_[size_t(peer)];
    postHeader(f);
    return Status::Success;
  }

  Status irecv(int peer, uint64_t tag, void* buf, size_t len, Request* req) override {
    Frame* f = take(req, false, peer, tag, buf);
    const Status s = inner_->irecv(peer, tag, buf, len, &f->data);
    if (!ok(s)) return giveBack(f, s);
    postHeader(f);
    return Status::Success;
  }

  // Completes a user request once both of its messages are in (or either failed), then
  // keeps its frame until the inner endpoint is done with both.
  int progress() override {
    inner_->progress();
    while (!stalled_.empty() && postHeaderNow(stalled_.front()) != Status::InProgress) stalled_.pop_front();
    int completed = 0;
    for (size_t i = 0; i < active_.size();) {
      Frame* f = active_[i];
      if (f->user && finished(*f)) {
        Status s = f->failed;
        if (ok(s) && !ok(f->data.status)) s = f->data.status;
        if (ok(s) && !ok(f->header.status)) s = f->header.status;
        if (ok(s) && !f->send) s = verify(*f);
        f->user->bytes = f->data.bytes;
        f->user->status = s;
        f->user->done = true;
        f->user = nullptr;
        ++completed;
      }
      const bool innerDone = (!f->dataPosted || f->data.done) && (!f->headerPosted || f->header.done);
      if (!f->user && innerDone) {
        active_[i] = active_.back();
        active_.pop_back();
        free_.push_back(f);
      } else {
        ++i;
      }
    }
    return completed;
  }

  // Each user message takes two inner requests.
  int maxOutstanding() const override { return std::max(1, inner_->maxOutstanding() / 2); }

  void cancelAll() override {
    inner_->cancelAll();
    stalled_.clear();
    for (Frame* f : active_) free_.push_back(f);
    active_.clear();
  }

 private:
  // Done: both parts arrived, or one failed (the other may never come).
  static bool finished(const Frame& f) {
    if (!ok(f.failed)) return true;
    if ((f.data.done && !ok(f.data.status)) || (f.header.done && !ok(f.header.status))) return true;
    return f.data.done && f.header.done;
  }

  Frame* take(Request* user, bool send, int peer, uint64_t tag, void* buf) {
    if (free_.empty()) {
      frames_.push_back(std::make_unique<Frame>());
      free_.push_back(frames_.back().get());
    }
    Frame* f = free_.back();
    free_.pop_back();
    f->user = user;
    f->send = send;
    f->peer = peer;
    f->tag = tag;
    f->buf = buf;
    f->dataPosted = f->headerPosted = false;
    f->failed = Status::Success;
    f->data.reset();
    f->data.region = user->region;
    f->header.reset();
    return f;
  }

  // The payload's post was refused: nothing of this message is posted.
  Status giveBack(Frame* f, Status s) {
    free_.push_back(f);
    return s;
  }

  // The payload is posted; the header follows it, behind any header still waiting for room
  // (headers must reach the inner endpoint in the order of their payloads).
  void postHeader(Frame* f) {
    f->dataPosted = true;
    active_.push_back(f);
    if (!stalled_.empty() || postHeaderNow(f) == Status::InProgress) stalled_.push_back(f);
  }

  Status postHeaderNow(Frame* f) {
    const uint64_t tag = f->tag | kHeaderTagBit;
    const Status s = f->send ? inner_->isend(f->peer, tag, &f->h, sizeof f->h, &f->header)
                             : inner_->irecv(f->peer, tag, &f->h, sizeof f->h, &f->header);
    if (s == Status::InProgress) return s;
    if (ok(s)) {
      f->headerPosted = true;
    } else {
      f->failed = s;
    }
    return s;
  }

  Status verify(Frame& f) {
    const Header& h = f.h;
    if (f.header.bytes != sizeof h || h.magic != kMagic || h.headerCrc != crc32c(&h, kCoveredBytes))
      return fail(Status::SystemError,
                  "framed: the header of a message from rank %d (tag %#" PRIx64
                  ") is corrupt (%zu bytes, magic %#x, header CRC-32C mismatch)",
                  f.peer, f.tag, f.header.bytes, h.magic);
    if (h.tag != f.tag)
      return fail(Status::SystemError,
                  "framed: a message from rank %d arrived on tag %#" PRIx64 " but its header names tag %#" PRIx64,
                  f.peer, f.tag, h.tag);
    if (f.data.bytes != h.len)
      return fail(Status::SystemError,
                  "framed: message #%" PRIu64 " from rank %d (tag %#" PRIx64 ") is %zu bytes, its header says %" PRIu64,
                  h.seq, f.peer, f.tag, f.data.bytes, h.len);
    if (const uint32_t crc = crc32c(f.buf, f.data.bytes); crc != h.payloadCrc)
      return fail(Status::SystemError,
                  "framed: message #%" PRIu64 " from rank %d (tag %#" PRIx64
                  ", %zu bytes) failed its CRC-32C check: %08x received, %08x sent",
                  h.seq, f.peer, f.tag, f.data.bytes, crc, h.payloadCrc);
    if (seen_.size() <= size_t(f.peer)) seen_.resize(size_t(f.peer) + 1);
    if (const char* why = seen_[size_t(f.peer)].admit(h.seq))
      return fail(Status::SystemError, "framed: message #%" PRIu64 " from rank %d (tag %#" PRIx64 ") carries %s",
                  h.seq, f.peer, f.tag, why);
    return Status::Success;
  }

  std::vector<std::unique_ptr<Frame>> frames_;  // every frame made (stable addresses)
  std::vector<Frame*> free_, active_;
  std::deque<Frame*> stalled_;      // payload posted, header refused for now
  std::vector<uint64_t> nextSeq_;   // per destination
  std::vector<SeenWindow> seen_;    // per source
};

}  // namespace

std::unique_ptr<Endpoint> create(std::unique_ptr<Endpoint> inner) {
  return std::make_unique<FramedEndpoint>(std::move(inner));
}

}  // namespace tempo::transport::framed
