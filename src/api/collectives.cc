// The collective and point-to-point entry points. Each one validates its arguments in
// NCCL's order (communicator, buffers and counts, datatype, op, root or peer, layout),
// converts them to a comm::CollArgs and submits it; an error inside a group also fails
// the group, as in NCCL.
#include "src/api/entry.h"

#include <cstdint>
#include <tuple>

#include "src/api/checks.h"
#include "src/comm/group.h"
#include "src/core/dtype.h"

using tempo::Status;
using tempo::fail;
using tempo::api::guarded;
namespace comm = tempo::comm;
using tempo::engine::CollKind;

namespace {

// What a call needs checked besides the communicator and datatype.
enum : unsigned {
  kSend = 1u << 0,          // reads sendbuff (count elements)
  kRecv = 1u << 1,          // writes recvbuff (count elements)
  kSendPerRank = 1u << 2,   // sendbuff holds nranks x count elements
  kRecvPerRank = 1u << 3,   // recvbuff holds nranks x count elements
  kSendRootOnly = 1u << 4,  // sendbuff is significant on the root only
  kRecvRootOnly = 1u << 5,  // recvbuff is significant on the root only
  kReduces = 1u << 6,       // takes an op
  kRooted = 1u << 7,        // takes a root
  kPeered = 1u << 8,        // takes a peer
  kNotInPlace = 1u << 9,    // sendbuff == recvbuff is refused
};

Status checkAndSubmit(ncclComm_t handle, const char* fn, unsigned shape, comm::CollArgs a,
                      ncclDataType_t datatype, ncclRedOp_t op) {
  Status s = [&]() -> Status {
    TEMPO_ASSIGN(comm::Pin c, tempo::api::liveComm(handle, fn));
    if (int(datatype) < 0 || int(datatype) >= int(ncclNumTypes))
      return fail(Status::InvalidArgument, "%s: invalid datatype %d", fn, int(datatype));
    const uint64_t size = tempo::dataTypeSize(tempo::DataType(datatype));
    const uint64_t mul = (shape & (kSendPerRank | kRecvPerRank)) ? uint64_t(c->nranks()) : 1;
    if (a.count > SIZE_MAX / size / mul)
      return fail(Status::InvalidArgument, "%s: count %zu of %lu-byte elements overflows the address space", fn,
                  a.count, (unsigned long)size);
    if (shape & kRooted) {
      if (a.root < 0 || a.root >= c->nranks())
        return fail(Status::InvalidArgument, "%s: root %d is outside [0, %d)", fn, a.root, c->nranks());
    }
    const bool root = c->rank() == a.root;
    const bool needSend = (shape & kSend) && (!(shape & kSendRootOnly) || root);
    const bool needRecv = (shape & kRecv) && (!(shape & kRecvRootOnly) || root);
    if (a.count && needSend && !a.send)
      return fail(Status::InvalidArgument, "%s: sendbuff is NULL with count %zu", fn, a.count);
    if (a.count && needRecv && !a.recv)
      return fail(Status::InvalidArgument, "%s: recvbuff is NULL with count %zu", fn, a.count);
    if ((shape & kNotInPlace) && a.count && a.send == a.recv)
      return fail(Status::InvalidUsage, "%s: in place (sendbuff == recvbuff) is not supported", fn);
    if (shape & kReduces) {
      if (int(op) >= int(ncclNumOps) && int(op) < int(ncclMaxRedOp)) {
        const comm::PreMulSumOp* u = c->preMulSum(int(op));
        if (!u)
          return fail(Status::InvalidArgument,
                      "%s: reduction op %d was not created by ncclRedOpCreatePreMulSum on this communicator (or was "
                      "destroyed)", fn, int(op));
        if (int(u->type) != int(datatype))
          return fail(Status::InvalidArgument, "%s: reduction op %d was created for %s, not %s", fn, int(op),
                      tempo::dataTypeName(u->type), tempo::dataTypeName(tempo::DataType(datatype)));
        a.op = tempo::RedOp::Sum;
        a.scalar = u->scalar();
      } else if (int(op) < 0 || int(op) >= int(ncclNumOps)) {
        return fail(Status::InvalidArgument, "%s: invalid reduction op %d", fn, int(op));
      } else {
        a.op = tempo::RedOp(op);
      }
    }
    if ((shape & kPeered) && (a.peer < 0 || a.peer >= c->nranks()))
      return fail(Status::InvalidArgument, "%s: peer %d is outside [0, %d)", fn, a.peer, c->nranks());
    a.type = tempo::DataType(datatype);
    return comm::submitCollective(c, a);
  }();
  if (!ok(s)) comm::groupRecordError(s);
  return s;
}

comm::CollArgs args(CollKind k, const void* send, void* recv, size_t count, void* stream) {
  comm::CollArgs a;
  a.coll = k;
  a.send = send;
  a.recv = recv;
  a.count = count;
  a.stream = stream;
  return a;
}

ncclResult_t allToAllv(const void* sendbuff, const size_t sendcounts[], const size_t sdispls[], void* recvbuff,
                       const size_t recvcounts[], const size_t rdispls[], ncclDataType_t datatype, ncclComm_t comm,
                       hipStream_t stream, const char* fn) {
  return guarded([&]() -> Status {
    Status s = [&]() -> Status {
      TEMPO_ASSIGN(comm::Pin c, tempo::api::liveComm(comm, fn));
      if (!sendcounts || !sdispls || !recvcounts || !rdispls)
        return fail(Status::InvalidArgument, "%s: a count or displacement array is NULL", fn);
      if (int(datatype) < 0 || int(datatype) >= int(ncclNumTypes))
        return fail(Status::InvalidArgument, "%s: invalid datatype %d", fn, int(datatype));
      const uint64_t size = tempo::dataTypeSize(tempo::DataType(datatype));
      uint64_t sent = 0, received = 0;
      for (int j = 0; j < c->nranks(); ++j) {
        for (auto [cnt, disp, what] : {std::tuple{sendcounts[j], sdispls[j], "send"},
                                       std::tuple{recvcounts[j], rdispls[j], "recv"}}) {
          if (cnt > SIZE_MAX / size || disp > SIZE_MAX / size - cnt)
            return fail(Status::InvalidArgument, "%s: %scounts[%d] + %sdispls[%d] overflows the address space", fn,
                        what, j, what, j);
        }
        sent += sendcounts[j];
        received += recvcounts[j];
      }
      if (sent && !sendbuff) return fail(Status::InvalidArgument, "%s: sendbuff is NULL with data to send", fn);
      if (received && !recvbuff) return fail(Status::InvalidArgument, "%s: recvbuff is NULL with data to receive", fn);
      if (sendbuff && sendbuff == recvbuff && (sent || received))
        return fail(Status::InvalidUsage, "%s: in-place all-to-all (sendbuff == recvbuff) is not supported", fn);
      comm::CollArgs a = args(CollKind::AllToAllv, sendbuff, recvbuff, 0, stream);
      a.type = tempo::DataType(datatype);
      a.sendCounts = sendcounts;
      a.sendDispls = sdispls;
      a.recvCounts = recvcounts;
      a.recvDispls = rdispls;
      return comm::submitCollective(c, a);
    }();
    if (!ok(s)) comm::groupRecordError(s);
    return s;
  });
}

}  // namespace

NCCL_API(ncclResult_t, ncclAllReduce, const void* sendbuff, void* recvbuff, size_t count, ncclDataType_t datatype,
         ncclRedOp_t op, ncclComm_t comm, hipStream_t stream) {
  return guarded([&] {
    return checkAndSubmit(comm, "ncclAllReduce", kSend | kRecv | kReduces,
                          args(CollKind::AllReduce, sendbuff, recvbuff, count, stream), datatype, op);
  });
}

// RCCL's fused all-reduce: the count-element array acc (on every rank) is combined into
// each rank's result with op, after the reduction across ranks (Avg: added to the
// average). A NULL acc makes it a plain all-reduce.
NCCL_API(ncclResult_t, ncclAllReduceWithBias, const void* sendbuff, void* recvbuff, size_t count,
         ncclDataType_t datatype, ncclRedOp_t op, ncclComm_t comm, hipStream_t stream, const void* acc) {
  return guarded([&] {
    comm::CollArgs a = args(CollKind::AllReduce, sendbuff, recvbuff, count, stream);
    a.bias = acc;
    return checkAndSubmit(comm, "ncclAllReduceWithBias", kSend | kRecv | kReduces, a, datatype, op);
  });
}

NCCL_API(ncclResult_t, ncclRedOpCreatePreMulSum, ncclRedOp_t* op, void* scalar, ncclDataType_t datatype,
         ncclScalarResidence_t residence, ncclComm_t comm) {
  return guarded([&]() -> Status {
    TEMPO_ASSIGN(comm::Pin c, tempo::api::liveComm(comm, "ncclRedOpCreatePreMulSum"));
    if (!op) return fail(Status::InvalidArgument, "ncclRedOpCreatePreMulSum: op is NULL");
    if (!scalar) return fail(Status::InvalidArgument, "ncclRedOpCreatePreMulSum: scalar is NULL");
    if (int(datatype) < 0 || int(datatype) >= int(ncclNumTypes))
      return fail(Status::InvalidArgument, "ncclRedOpCreatePreMulSum: invalid datatype %d", int(datatype));
    if (residence != ncclScalarDevice && residence != ncclScalarHostImmediate)
      return fail(Status::InvalidArgument, "ncclRedOpCreatePreMulSum: invalid scalar residence %d", int(residence));
    // Host memory build: a "device-resident" scalar is any memory read at each use.
    TEMPO_ASSIGN(int made, c->createPreMulSum(scalar, tempo::DataType(datatype), residence == ncclScalarDevice));
    *op = ncclRedOp_t(made);
    return Status::Success;
  });
}

NCCL_API(ncclResult_t, ncclRedOpDestroy, ncclRedOp_t op, ncclComm_t comm) {
  return guarded([&]() -> Status {
    TEMPO_ASSIGN(comm::Pin c, tempo::api::liveComm(comm, "ncclRedOpDestroy"));
    return c->destroyRedOp(int(op));
  });
}

NCCL_API(ncclResult_t, ncclBroadcast, const void* sendbuff, void* recvbuff, size_t count, ncclDataType_t datatype,
         int root, ncclComm_t comm, hipStream_t stream) {
  return guarded([&] {
    comm::CollArgs a = args(CollKind::Broadcast, sendbuff, recvbuff, count, stream);
    a.root = root;
    return checkAndSubmit(comm, "ncclBroadcast", kSend | kSendRootOnly | kRecv | kRooted, a, datatype, ncclSum);
  });
}

NCCL_API(ncclResult_t, ncclBcast, void* buff, size_t count, ncclDataType_t datatype, int root, ncclComm_t comm,
         hipStream_t stream) {
  return guarded([&] {
    comm::CollArgs a = args(CollKind::Broadcast, buff, buff, count, stream);
    a.root = root;
    return checkAndSubmit(comm, "ncclBcast", kSend | kRecv | kRooted, a, datatype, ncclSum);
  });
}

NCCL_API(ncclResult_t, ncclReduce, const void* sendbuff, void* recvbuff, size_t count, ncclDataType_t datatype,
         ncclRedOp_t op, int root, ncclComm_t comm, hipStream_t stream) {
  return guarded([&] {
    comm::CollArgs a = args(CollKind::Reduce, sendbuff, recvbuff, count, stream);
    a.root = root;
    return checkAndSubmit(comm, "ncclReduce", kSend | kRecv | kRecvRootOnly | kReduces | kRooted, a, datatype, op);
  });
}

NCCL_API(ncclResult_t, ncclAllGather, const void* sendbuff, void* recvbuff, size_t sendcount,
         ncclDataType_t datatype, ncclComm_t comm, hipStream_t stream) {
  return guarded([&] {
    return checkAndSubmit(comm, "ncclAllGather", kSend | kRecv | kRecvPerRank,
                          args(CollKind::AllGather, sendbuff, recvbuff, sendcount, stream), datatype, ncclSum);
  });
}

NCCL_API(ncclResult_t, ncclReduceScatter, const void* sendbuff, void* recvbuff, size_t recvcount,
         ncclDataType_t datatype, ncclRedOp_t op, ncclComm_t comm, hipStream_t stream) {
  return guarded([&] {
    return checkAndSubmit(comm, "ncclReduceScatter", kSend | kSendPerRank | kRecv | kReduces,
                          args(CollKind::ReduceScatter, sendbuff, recvbuff, recvcount, stream), datatype, op);
  });
}

NCCL_API(ncclResult_t, ncclAlltoAll, const void* sendbuff, void* recvbuff, size_t count, ncclDataType_t datatype,
         ncclComm_t comm, hipStream_t stream) {
  return guarded([&] {
    return checkAndSubmit(comm, "ncclAlltoAll", kSend | kSendPerRank | kRecv | kRecvPerRank | kNotInPlace,
                          args(CollKind::AllToAll, sendbuff, recvbuff, count, stream), datatype, ncclSum);
  });
}

NCCL_API(ncclResult_t, ncclAllToAll, const void* sendbuff, void* recvbuff, size_t count, ncclDataType_t datatype,
         ncclComm_t comm, hipStream_t stream) {
  return pncclAlltoAll(sendbuff, recvbuff, count, datatype, comm, stream);
}

NCCL_API(ncclResult_t, ncclAlltoAllv, const void* sendbuff, const size_t sendcounts[], const size_t sdispls[],
         void* recvbuff, const size_t recvcounts[], const size_t rdispls[], ncclDataType_t datatype,
         ncclComm_t comm, hipStream_t stream) {
  return allToAllv(sendbuff, sendcounts, sdispls, recvbuff, recvcounts, rdispls, datatype, comm, stream,
                   "ncclAlltoAllv");
}

NCCL_API(ncclResult_t, ncclAllToAllv, const void* sendbuff, const size_t sendcounts[], const size_t sdispls[],
         void* recvbuff, const size_t recvcounts[], const size_t rdispls[], ncclDataType_t datatype,
         ncclComm_t comm, hipStream_t stream) {
  return allToAllv(sendbuff, sendcounts, sdispls, recvbuff, recvcounts, rdispls, datatype, comm, stream,
                   "ncclAllToAllv");
}

NCCL_API(ncclResult_t, ncclGather, const void* sendbuff, void* recvbuff, size_t count, ncclDataType_t datatype,
         int root, ncclComm_t comm, hipStream_t stream) {
  return guarded([&] {
    comm::CollArgs a = args(CollKind::Gather, sendbuff, recvbuff, count, stream);
    a.root = root;
    return checkAndSubmit(comm, "ncclGather", kSend | kRecv | kRecvPerRank | kRecvRootOnly | kRooted, a, datatype,
                          ncclSum);
  });
}

NCCL_API(ncclResult_t, ncclScatter, const void* sendbuff, void* recvbuff, size_t count, ncclDataType_t datatype,
         int root, ncclComm_t comm, hipStream_t stream) {
  return guarded([&] {
    comm::CollArgs a = args(CollKind::Scatter, sendbuff, recvbuff, count, stream);
    a.root = root;
    return checkAndSubmit(comm, "ncclScatter", kSend | kSendPerRank | kSendRootOnly | kRecv | kRooted, a, datatype,
                          ncclSum);
  });
}

NCCL_API(ncclResult_t, ncclSend, const void* sendbuff, size_t count, ncclDataType_t datatype, int peer,
         ncclComm_t comm, hipStream_t stream) {
  return guarded([&] {
    comm::CollArgs a = args(CollKind::SendRecv, sendbuff, nullptr, count, stream);
    a.p2p = comm::P2p::Send;
    a.peer = peer;
    return checkAndSubmit(comm, "ncclSend", kSend | kPeered, a, datatype, ncclSum);
  });
}

NCCL_API(ncclResult_t, ncclRecv, void* recvbuff, size_t count, ncclDataType_t datatype, int peer, ncclComm_t comm,
         hipStream_t stream) {
  return guarded([&] {
    comm::CollArgs a = args(CollKind::SendRecv, nullptr, recvbuff, count, stream);
    a.p2p = comm::P2p::Recv;
    a.peer = peer;
    return checkAndSubmit(comm, "ncclRecv", kRecv | kPeered, a, datatype, ncclSum);
  });
}
