// The parameter-server strategy's parts that need no processes: the chief's hand-out of batches (each
// batch once, a lost worker's batches to the others, the staleness bound) and a shard's state on the
// wire.
#include <gtest/gtest.h>

#include <atomic>
#include <chrono>
#include <set>
#include <thread>

#include "core/train/parameter_server/batch_coordinator.hpp"
#include "core/train/parameter_server/ps_shard.hpp"

namespace {

using kx::core::BatchCoordinator;
using Kind = BatchCoordinator::Assignment::Kind;

TEST(BatchCoordinator, EveryBatchOnceAndALostWorkersBatchesGoToTheOthers) {
  BatchCoordinator c(2, 0);
  c.begin_epoch(10, 6, 0.5);
  const BatchCoordinator::Assignment a = c.next(0), b = c.next(0), d = c.next(1);
  ASSERT_EQ(a.kind, Kind::Batch);
  EXPECT_EQ(a.batch, 10);
  EXPECT_EQ(b.batch, 11);
  EXPECT_EQ(d.batch, 12);
  EXPECT_DOUBLE_EQ(a.learning_rate, 0.5);
  c.done(0, 10, 32, {1.0, 20, 32});
  c.lost(0, "worker 0 is gone");  // it held batch 11
  EXPECT_EQ(c.live_workers(), 1);
  c.done(0, 11, 32, {1.0, 20, 32});  // too late: no longer its batch
  std::set<int64_t> done{10};
  c.done(1, 12, 32, {1.0, 20, 32});
  done.insert(12);
  while (!c.epoch_complete()) {
    const BatchCoordinator::Assignment n = c.next(1);
    ASSERT_EQ(n.kind, Kind::Batch);
    EXPECT_TRUE(done.insert(n.batch).second) << "batch " << n.batch << " handed out twice";
    c.done(1, n.batch, 32, {1.0, 20, 32});
  }
  EXPECT_EQ(done, (std::set<int64_t>{10, 11, 12, 13, 14, 15}));
  const BatchCoordinator::Events e = c.wait(std::chrono::milliseconds(0));
  EXPECT_EQ(e.done.size(), 6u);
  ASSERT_EQ(e.lost.size(), 1u);
  EXPECT_NE(e.lost[0].find("its unfinished batch goes to the others"), std::string::npos) << e.lost[0];
  c.finish();
  EXPECT_EQ(c.next(1).kind, Kind::End);
}

// The chief counts an epoch's samples from the Done events: the one that completes the epoch comes
// with its last Done, even when the worker finishes between two of the chief's waits.
TEST(BatchCoordinator, TheEventsThatCompleteAnEpochCarryItsLastDone) {
  BatchCoordinator c(1, 0);
  c.begin_epoch(0, 2, 0.1);
  const int64_t first = c.next(0).batch, second = c.next(0).batch;
  c.done(0, first, 32, {1.0, 20, 32});
  const BatchCoordinator::Events before = c.wait(std::chrono::milliseconds(0));
  EXPECT_EQ(before.done.size(), 1u);
  EXPECT_FALSE(before.epoch_complete);
  c.done(0, second, 16, {1.0, 10, 12.5});  // the last batch, before the chief's next wait
  EXPECT_TRUE(c.epoch_complete());
  const BatchCoordinator::Events last = c.wait(std::chrono::hours(1));
  EXPECT_TRUE(last.epoch_complete);
  ASSERT_EQ(last.done.size(), 1u);
  EXPECT_EQ(last.done[0].rows, 16);
  EXPECT_EQ(last.done[0].sums.weight, 12.5);  // the weighted accuracy's denominator, not the rows
  // An epoch with nothing to hand out (training stopped) is complete at once: the wait returns (were
  // it to wait for an event, the test would hang until ctest's timeout).
  c.begin_epoch(2, 0, 0.1);
  EXPECT_TRUE(c.wait(std::chrono::hours(1)).epoch_complete);
}

TEST(BatchCoordinator, StalenessHoldsAFastWorkerUntilTheSlowestTakesABatch) {
  BatchCoordinator c(2, 2);
  c.begin_epoch(0, 100, 0.1);
  EXPECT_EQ(c.next(0).kind, Kind::Batch);
  EXPECT_EQ(c.next(0).kind, Kind::Batch);  // 2 ahead of worker 1: the bound
  std::atomic<bool> third{false};
  std::thread fast([&] {
    c.next(0);
    third = true;
  });
  std::this_thread::sleep_for(std::chrono::milliseconds(100));
  EXPECT_FALSE(third) << "worker 0 went 3 batches ahead";
  EXPECT_EQ(c.next(1).kind, Kind::Batch);  // the slowest moves: worker 0 may take one more
  fast.join();
  EXPECT_TRUE(third);
  EXPECT_EQ(c.max_gap(), 2);
  EXPECT_EQ(c.handed_out(), (std::vector<int64_t>{3, 1}));
  // A lost slow worker no longer holds the others back.
  c.lost(1, "gone");
  for (int i = 0; i < 5; ++i) EXPECT_EQ(c.next(0).kind, Kind::Batch);
}

TEST(BatchCoordinator, AFailureReachesEveryWorker) {
  BatchCoordinator c(1, 0);
  c.begin_epoch(0, 0, 0.1);  // nothing to hand out: next() waits
  std::thread waiting([&] {
    const BatchCoordinator::Assignment a = c.next(0);
    EXPECT_EQ(a.kind, Kind::Error);
    EXPECT_EQ(a.message, "ps 0 is gone");
  });
  c.fail(kx::Status::Comm, "ps 0 is gone");
  waiting.join();
  EXPECT_THROW(c.check(), kx::Error);
}

TEST(ShardState, RoundTripsAndRefusesWhatIsNotOne) {
  kx::distribute::ShardState s;
  s.step = 7;
  s.trained = {{0, 3}};
  s.state = {{3, 1}};
  s.params = {1, 2, 3, 4};
  s.m = {0.1f, 0.2f, 0.3f, 0.4f};
  s.v = {0.5f, 0.6f, 0.7f, 0.8f};
  const kx::distribute::ShardState back = kx::distribute::ShardState::decode(s.encode());
  EXPECT_EQ(back.step, 7);
  EXPECT_EQ(back.params, s.params);
  EXPECT_EQ(back.v, s.v);
  ASSERT_EQ(back.state.size(), 1u);
  EXPECT_EQ(back.state[0].first, 3);
  std::vector<char> cut = s.encode();
  cut.pop_back();
  EXPECT_THROW(kx::distribute::ShardState::decode(cut), kx::Error);
  s.trained = {{2, 5}};  // beyond the shard
  EXPECT_THROW(kx::distribute::ShardState::decode(s.encode()), kx::Error);
}

TEST(PsShard, AppliesAdamAsKerasDoes) {
  kx::distribute::PsShard shard(1);
  kx::distribute::ShardState s;
  s.trained = {{0, 1}};
  s.params = {1.0f};
  s.m = {0.0f};
  s.v = {0.0f};
  shard.reset(s);
  const float g = 0.5f;
  EXPECT_EQ(shard.apply(&g, 1, 0.001f), 1);
  // Adam's first step moves a weight by about the learning rate, against the gradient's sign.
  EXPECT_NEAR(shard.state().params[0], 1.0f - 0.001f, 1e-6f);
  EXPECT_THROW(shard.apply(&g, 2, 0.001f), kx::Error);
}

}  // namespace
