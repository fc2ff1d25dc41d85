// The thread that runs a nonblocking communicator's operations (config.blocking = 0).
//
// NCCL's contract for nonblocking communicators: init, split, finalize, collectives and
// ncclGroupEnd return ncclInProgress at once, the operation completes in the background,
// and ncclCommGetAsyncError reports ncclInProgress until it has, then its result. A
// communicator has at most one such operation in flight: a call made before the previous
// one completed is refused (ncclInvalidArgument). Jobs still queue in order, because a
// blocking communicator's worker can serve several nonblocking splits of it.
//
// The thread starts with the first job and is joined by stop() or the destructor, after
// the queued jobs have run: the owner makes that prompt by requesting an abort first.
#pragma once

#include <condition_variable>
#include <deque>
#include <functional>
#include <mutex>
#include <thread>

namespace tempo::comm {

class AsyncWorker {
 public:
  AsyncWorker() = default;
  AsyncWorker(const AsyncWorker&) = delete;
  AsyncWorker& operator=(const AsyncWorker&) = delete;
  ~AsyncWorker() { stop(); }

  // Lets the job in flight (and one posted) finish, then joins the thread. Idempotent.
  void stop() {
    {
      std::lock_guard<std::mutex> lock(mu_);
      stop_ = true;
    }
    cv_.notify_all();
    if (thread_.joinable()) thread_.join();
  }

  // Runs `job` on the worker thread, after the jobs posted before it. Notifies under the
  // lock: the job may finish, and its owner destroy this worker, as soon as the lock is
  // released, and a notify after that would touch a destroyed condition variable (found
  // by TSan when a parent's worker posted its nonblocking child's init).
  void post(std::function<void()> job) {
    std::lock_guard<std::mutex> lock(mu_);
    jobs_.push_back(std::move(job));
    if (!thread_.joinable()) thread_ = std::thread([this] { loop(); });
    cv_.notify_all();
  }

 private:
  void loop() {
    std::unique_lock<std::mutex> lock(mu_);
    for (;;) {
      cv_.wait(lock, [this] { return stop_ || !jobs_.empty(); });
      if (jobs_.empty()) return;  // stopping, nothing left to run
      std::function<void()> job = std::move(jobs_.front());
      jobs_.pop_front();
      lock.unlock();
      job();
      lock.lock();
    }
  }

  std::mutex mu_;
  std::condition_variable cv_;
  std::deque<std::function<void()>> jobs_;
  bool stop_ = false;
  std::thread thread_;
};

}  // namespace tempo::comm
