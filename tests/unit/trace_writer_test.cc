// TEMPO_TRACE's path pattern and its files' contents (src/comm/trace.h).
#include <gtest/gtest.h>

#include <fstream>
#include <sstream>
#include <unistd.h>

#include "src/comm/trace.h"

namespace tempo::comm {
namespace {

TEST(TraceWriter, ExpandsRankHostPidAndCommunicator) {
  TraceIdentity who{0xabc, 3, 8, "node07"};
  EXPECT_EQ(TraceWriter::expand("/tmp/t.%r.%h", who), "/tmp/t.3.node07");
  EXPECT_EQ(TraceWriter::expand("/tmp/t-%c-%r.json", who), "/tmp/t-0000000000000abc-3") << "a trailing .json goes";
  EXPECT_EQ(TraceWriter::expand("t%p", who), "t" + std::to_string(getpid()));
  EXPECT_EQ(TraceWriter::expand("100%%-%q", who), "100%-%q") << "%% is a percent sign; unknown escapes stay";
}

TEST(TraceWriter, NoPatternNoWriterAndAnUnwritablePathIsSkipped) {
  EXPECT_EQ(TraceWriter::open("", {}), nullptr);
  EXPECT_EQ(TraceWriter::open("/nonexistent-dir/x/%r", {}), nullptr);
}

TEST(TraceWriter, WritesOneLineAndOneEventPerCollective) {
  const std::string stem = ::testing::TempDir() + "/trace_writer_" + std::to_string(getpid());
  {
    auto w = TraceWriter::open((stem + ".json").c_str(), {0x1234, 1, 2, "hostA"});
    ASSERT_NE(w, nullptr);
    w->setClock({true, -1500, 800, 16});
    w->setClock({});  // no estimate, no line
    engine::OpRecord r;
    r.seq = 0;
    r.bytes = 4096;
    r.algorithm = "ring";
    r.tEnter = 1000;
    r.tExit = 5000;
    engine::PeerFlows peers;
    w->onRecord(r, peers);
    w->setIterationPeriod(2);
    r.seq = 1;
    r.delayNs = 700;
    r.flows[size_t(engine::Tier::Fabric)] = {8192, 6144, 4, 2000, 4500};
    peers.add(3, engine::Tier::Fabric, 2048, 2000);
    peers.add(3, engine::Tier::Fabric, 6144, 4500);
    w->onRecord(r, peers);
    // Nine peers send one message each: the first eight are kept, the ninth counted.
    r.seq = 2;
    r.delayNs = 0;
    r.flows = {};
    peers.clear();
    for (int p = 0; p < 9; ++p) peers.add(p + 10, engine::Tier::Leaf, 100, 3000 + p);
    w->onRecord(r, peers);
  }
  auto slurp = [](const std::string& path) {
    std::ifstream in(path);
    std::stringstream s;
    s << in.rdbuf();
    return s.str();
  };
  const std::string lines = slurp(stem + ".jsonl"), events = slurp(stem + ".json");
  EXPECT_NE(lines.find("{\"type\":\"comm\",\"version\":1,\"comm\":\"0000000000001234\",\"rank\":1,\"nranks\":2,\"host\":\"hostA\""),
            std::string::npos);
  EXPECT_NE(lines.find("\"seq\":0,\"coll\":\"AllReduce\",\"algo\":\"ring\",\"bytes\":4096,\"t_arr\":1000,\"t_first\":0,\"t_exit\":5000,\"delay\":0"),
            std::string::npos);
  EXPECT_NE(lines.find("\"seq\":1,"), std::string::npos);
  EXPECT_NE(lines.find("\"delay\":700,\"status\":0,\"rx_fabric\":[8192,6144,4,2000,4500],"
                       "\"rx_peers\":[[3,\"fabric\",8192,6144,2,2000,4500]]}\n"),
            std::string::npos)
      << "a tier that sent data has its flow; the others none; each peer its own";
  EXPECT_EQ(lines.find("\"seq\":0,\"coll\":\"AllReduce\",\"algo\":\"ring\",\"bytes\":4096,\"t_arr\":1000,\"t_first\":0,"
                       "\"t_exit\":5000,\"delay\":0,\"status\":0,\"rx_"),
            std::string::npos)
      << "no data, no flows";
  EXPECT_NE(lines.find("[17,\"leaf\",100,0,1,3007,3007]],\"rx_peers_unkept\":1}\n"), std::string::npos)
      << "eight peers kept, the ninth's message counted";
  EXPECT_EQ(lines.find("[18,\"leaf\""), std::string::npos);
  EXPECT_EQ(lines.find("rx_host"), std::string::npos);
  EXPECT_NE(lines.find("\n{\"type\":\"clock\",\"offset\":-1500,\"error\":800,\"probes\":16}\n{\"type\":\"coll\",\"seq\":0,"),
            std::string::npos);
  const size_t firstClock = lines.find("\"type\":\"clock\"");
  EXPECT_EQ(lines.find("\"type\":\"clock\"", firstClock + 1), std::string::npos) << "no line for no estimate";
  EXPECT_NE(lines.find("\n{\"type\":\"hint\",\"period\":2,\"seq\":1}\n{\"type\":\"coll\",\"seq\":1,"), std::string::npos)
      << "the declared period comes before the first collective it was known at";
  EXPECT_NE(events.find("\"ph\":\"X\",\"pid\":1,\"tid\":0,\"ts\":1.000,\"dur\":4.000"), std::string::npos);
  EXPECT_NE(events.find("\"name\":\"pacing gate\""), std::string::npos) << "the gated collective shows its gate";
  EXPECT_EQ(events.substr(events.size() - 3), "]}\n");
  unlink((stem + ".json").c_str());
  unlink((stem + ".jsonl").c_str());
}

}  // namespace
}  // namespace tempo::comm
