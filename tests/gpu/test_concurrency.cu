// Several host threads, several streams, several devices (issues 6 and 7).
//
//  1. Lazy per-device state under contention: 4 threads call kdtree_prepare,
//     kdtree_device_supported and kdtree_verify_workspace_size at once as
//     their first library calls; every visible device prepares and is
//     supported, ordinals -1 and device_count are INVALID_ARGUMENT.
//  2. Concurrent entry points: 4 threads, each with its own non-blocking
//     stream, workspace and inputs, run kdtree_verify_paged (split-K),
//     kdtree_merge_attention_states and kdtree_defrag_copy 25 times; every
//     result equals the serial run of the same inputs bitwise.
//  3. Thread-local errors: each thread makes an invalid call naming its own
//     value, waits until every thread has made its own, and reads back
//     exactly its own message.
//  4. Two GPUs (runs when cudaGetDeviceCount >= 2): one process, one thread
//     per device with cudaSetDevice, the same verify problem on each; both
//     equal the single-GPU run bitwise (fixed splits) and the host
//     reference (splits picked from each device's SM count). With one GPU
//     the test says so and passes on parts 1-3.
//
// Under a sanitizer (light mode): 3 concurrent rounds instead of 25, 10
// error rounds instead of 50, 2 two-GPU rounds instead of 10, verify
// prefixes cut 4x; every part and every entry point still runs.
#include <atomic>
#include <cstdio>
#include <cstring>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include "common/gpu_test.hpp"
#include "common/paged_problem.hpp"

using namespace kdtest;

namespace {

constexpr int kThreads = 4;

const int kRounds = scaled(25, 3);  // 3 under a sanitizer (light mode)

// Outcomes a worker thread records; the main thread reports them.
struct Outcome {
  std::vector<std::string> failures;
  void check(bool ok, const std::string& what) {
    if (!ok) failures.push_back(what);
  }
};

int device_count() {
  int count = 0;
  CUDA_CHECK(cudaGetDeviceCount(&count));
  return count;
}

// ---- 1. per-device state ----

void prepare_under_contention(Report& report) {
  const int devices = device_count();
  std::vector<Outcome> outcomes(kThreads);
  std::atomic<int> ready{0};
  std::vector<std::thread> threads;
  for (int t = 0; t < kThreads; ++t) {
    threads.emplace_back([&, t] {
      Outcome& out = outcomes[t];
      ++ready;
      while (ready.load() < kThreads) {
      }
      for (int d = 0; d < devices; ++d) {
        const int device = (d + t) % devices;  // threads start on different devices
        out.check(kdtree_prepare(device) == KDTREE_OK, "kdtree_prepare(" + std::to_string(device) + ")");
        int32_t ok = 0;
        out.check(kdtree_device_supported(device, &ok) == KDTREE_OK && ok == 1,
                  "kdtree_device_supported(" + std::to_string(device) + ")");
      }
      out.check(kdtree_prepare(devices) == KDTREE_ERROR_INVALID_ARGUMENT, "kdtree_prepare(device_count)");
      out.check(std::strstr(kdtree_last_error_message(), "out of range") != nullptr,
                "kdtree_prepare(device_count) message");
      out.check(kdtree_prepare(-1) == KDTREE_ERROR_INVALID_ARGUMENT, "kdtree_prepare(-1)");
      int32_t ok = 0;
      out.check(kdtree_device_supported(devices, &ok) == KDTREE_ERROR_INVALID_ARGUMENT,
                "kdtree_device_supported(device_count)");
      // The library restores the caller's current device.
      int current = -1;
      CUDA_CHECK(cudaGetDevice(&current));
      out.check(current == 0, "current device changed by kdtree_prepare");
      kdtree_verify_paged_params p;
      kdtree_verify_paged_params_init(&p);
      p.batch_size = 4;
      p.num_heads = 16;
      p.max_q_len = 16;
      p.total_q = 64;
      p.max_kv_len = 8192;
      size_t bytes = 0;
      out.check(kdtree_verify_workspace_size(&p, &bytes) == KDTREE_OK, "kdtree_verify_workspace_size");
    });
  }
  for (auto& th : threads) th.join();
  for (const Outcome& out : outcomes) {
    report.add_case();
    for (const std::string& f : out.failures) report.check(false, "prepare: " + f);
  }
  std::printf("prepare: %d threads x %d device(s) prepared concurrently\n", kThreads, devices);
}

// ---- 2. concurrent entry points ----

// One thread's inputs and its serial results.
struct Job {
  explicit Job(uint64_t seed, int index);

  void run_merge(cudaStream_t stream);
  void run_copy(cudaStream_t stream);
  std::vector<uint8_t> merge_bytes() const { return merge_out.download(); }
  std::vector<uint8_t> pool_bytes() const { return pool.download(); }

  Rng rng;
  PagedProblem problem;
  int splits;
  // merge: S states of [tokens, H, 512] f32 -> bf16
  static constexpr int kStates = 5, kHeads = 16, kDim = 512;
  static constexpr int64_t kTokens = 40;
  DeviceBuffer merge_states, merge_lse, merge_out, merge_out_lse;
  // defrag: 3 layers of 2048 slots x 1152 bytes, 300 moves
  static constexpr int kLayers = 3;
  static constexpr int64_t kSlots = 2048, kRowBytes = 1152, kMoves = 300;
  DeviceBuffer pool, layer_base, move_src, move_dst;
  std::vector<uint8_t> pool_initial;
  // serial results
  PagedResult verify_serial;
  std::vector<uint8_t> merge_serial, pool_serial;
};

PagedSpec job_spec(int index) {
  PagedSpec s;
  s.q_lens = {16, 9 + index, 16};
  s.prefixes = scaled<std::vector<int64_t>>({2000 + 300 * index, 517, 3000}, {500 + 75 * index, 129, 750});
  s.num_heads = 16;
  s.mask_kind = index % 2 ? KDTREE_MASK_TREE_DENSE : KDTREE_MASK_CAUSAL;
  return s;
}

Job::Job(uint64_t seed, int index)
    : rng(seed), problem(job_spec(index), rng), splits(index == 0 ? 0 : 2 * index + 2) {
  std::vector<float> states(size_t(kStates) * kTokens * kHeads * kDim), lse(size_t(kStates) * kTokens * kHeads);
  for (float& x : states) x = rng.uniform(-2.0f, 2.0f);
  for (float& x : lse) x = rng.uniform(-4.0f, 4.0f);
  merge_states = DeviceBuffer(states.size() * 4);
  merge_lse = DeviceBuffer(lse.size() * 4);
  merge_out = DeviceBuffer(size_t(kTokens) * kHeads * kDim * 2);
  merge_out_lse = DeviceBuffer(size_t(kTokens) * kHeads * 4);
  merge_states.upload(states);
  merge_lse.upload(lse);

  pool_initial.resize(size_t(kLayers) * kSlots * kRowBytes);
  for (uint8_t& b : pool_initial) b = uint8_t(rng.next());
  pool = DeviceBuffer(pool_initial.size());
  pool.upload(pool_initial);
  std::vector<uint64_t> bases(kLayers);
  for (int l = 0; l < kLayers; ++l)
    bases[l] = reinterpret_cast<uint64_t>(pool.as<uint8_t>() + size_t(l) * kSlots * kRowBytes);
  layer_base = DeviceBuffer(bases.size() * 8);
  layer_base.upload(bases);
  // Sources from the first half, destinations from the second: disjoint.
  std::vector<int32_t> src(kMoves), dst(kMoves);
  for (int64_t m = 0; m < kMoves; ++m) {
    src[m] = int32_t(m * 3);
    dst[m] = int32_t(kSlots / 2 + (m * 7) % (kSlots / 2));
  }
  move_src = DeviceBuffer(src.size() * 4);
  move_dst = DeviceBuffer(dst.size() * 4);
  move_src.upload(src);
  move_dst.upload(dst);
}

void Job::run_merge(cudaStream_t stream) {
  const kdtree_merge_params p = dense_merge_params(kStates, kTokens, kHeads, kDim, merge_states.data(),
                                                  merge_lse.as<float>(), merge_out.data(), KDTREE_DTYPE_BF16,
                                                  merge_out_lse.as<float>());
  CUDA_CHECK(cudaMemsetAsync(merge_out.data(), kOutputSentinel, merge_out.size(), stream));
  KDTREE_CHECK(kdtree_merge_attention_states(&p, stream));
}

void Job::run_copy(cudaStream_t stream) {
  CUDA_CHECK(cudaMemcpyAsync(pool.data(), pool_initial.data(), pool_initial.size(), cudaMemcpyHostToDevice, stream));
  kdtree_defrag_copy_params p;
  KDTREE_CHECK(kdtree_defrag_copy_params_init(&p));
  p.num_layers = kLayers;
  p.layer_base = layer_base.as<const uint64_t>();
  p.slot_stride_bytes = kRowBytes;
  p.row_bytes = kRowBytes;
  p.num_slots = kSlots;
  p.src_slots = move_src.data();
  p.dst_slots = move_dst.data();
  p.index_dtype = KDTREE_DTYPE_INT32;
  p.max_moves = kMoves;
  KDTREE_CHECK(kdtree_defrag_copy(&p, stream));
}

void concurrent_entry_points(Report& report, uint64_t seed) {
  std::vector<std::unique_ptr<Job>> jobs;
  for (int t = 0; t < kThreads; ++t) jobs.push_back(std::make_unique<Job>(seed + 1000 * t, t));

  // Serial results, one job after the other on the legacy stream.
  for (auto& job : jobs) {
    job->verify_serial = job->problem.run_device(Entry::kProduction, job->splits);
    job->run_merge(nullptr);
    job->run_copy(nullptr);
    CUDA_CHECK(cudaDeviceSynchronize());
    job->merge_serial = job->merge_bytes();
    job->pool_serial = job->pool_bytes();
    const Comparison c = job->problem.compare(job->verify_serial, job->problem.run_host());
    report.add_case();
    report.error(c.rel_frobenius);
    report.check(within_bars(c), "serial verify off the reference");
  }

  std::vector<Outcome> outcomes(kThreads);
  std::atomic<int> ready{0};
  std::vector<std::thread> threads;
  for (int t = 0; t < kThreads; ++t) {
    threads.emplace_back([&, t] {
      Job& job = *jobs[t];
      Outcome& out = outcomes[t];
      cudaStream_t stream;
      CUDA_CHECK(cudaStreamCreateWithFlags(&stream, cudaStreamNonBlocking));
      ++ready;
      while (ready.load() < kThreads) {
      }
      for (int round = 0; round < kRounds; ++round) {
        job.problem.reset_outputs(stream);
        job.problem.enqueue(Entry::kProduction, job.splits, stream);
        job.run_merge(stream);
        job.run_copy(stream);
        CUDA_CHECK(cudaStreamSynchronize(stream));
        const PagedResult verify = job.problem.collect();
        const std::string at = "thread " + std::to_string(t) + " round " + std::to_string(round) + ": ";
        out.check(verify.out_bytes == job.verify_serial.out_bytes && verify.lse_bytes == job.verify_serial.lse_bytes,
                  at + "kdtree_verify_paged differs from the serial run");
        out.check(job.merge_bytes() == job.merge_serial, at + "kdtree_merge_attention_states differs");
        out.check(job.pool_bytes() == job.pool_serial, at + "kdtree_defrag_copy differs");
      }
      CUDA_CHECK(cudaStreamDestroy(stream));
    });
  }
  for (auto& th : threads) th.join();
  for (const Outcome& out : outcomes) {
    report.add_case();
    for (const std::string& f : out.failures) report.check(false, f);
  }
  std::printf("concurrent: %d threads x %d rounds of verify + merge + defrag copy\n", kThreads, kRounds);
}

// ---- 3. thread-local error messages ----

void thread_local_errors(Report& report) {
  const int error_rounds = scaled(50, 10);
  std::vector<Outcome> outcomes(kThreads);
  std::atomic<int> arrived{0};
  std::vector<std::thread> threads;
  for (int t = 0; t < kThreads; ++t) {
    threads.emplace_back([&, t] {
      Outcome& out = outcomes[t];
      for (int round = 0; round < error_rounds; ++round) {
        kdtree_verify_paged_params p;
        kdtree_verify_paged_params_init(&p);
        p.batch_size = 1;
        p.num_heads = 1000 + 10 * t;  // this thread's value appears in its message
        const kdtree_status status = kdtree_verify_paged(&p, nullptr, 0, nullptr);
        // Wait until every thread has failed in this round, then read.
        ++arrived;
        while (arrived.load() < kThreads * (round + 1)) {
        }
        const std::string expected = "kdtree_verify_paged: num_heads = " + std::to_string(1000 + 10 * t);
        const std::string message = kdtree_last_error_message();
        out.check(status == KDTREE_ERROR_UNSUPPORTED, "thread " + std::to_string(t) + ": status");
        out.check(message.rfind(expected, 0) == 0,
                  "thread " + std::to_string(t) + " reads \"" + message + "\", expected \"" + expected + "...\"");
        // A success on this thread clears only this thread's message.
        int32_t ok = 0;
        kdtree_device_supported(0, &ok);
        out.check(std::string(kdtree_last_error_message()).empty(), "success left a message");
      }
    });
  }
  for (auto& th : threads) th.join();
  for (const Outcome& out : outcomes) {
    report.add_case();
    for (const std::string& f : out.failures) report.check(false, "errors: " + f);
  }
  std::printf("errors: %d threads x %d rounds of interleaved failures, each read its own message\n", kThreads,
              error_rounds);
}

// ---- 4. two GPUs from one process ----

void two_devices(Report& report, uint64_t seed) {
  const int devices = device_count();
  if (devices < 2) {
    std::printf("1 GPU: multi-device part not run\n");
    return;
  }
  PagedSpec spec = job_spec(1);
  spec.q_lens = {16, 16, 7, 16};
  spec.prefixes = scaled<std::vector<int64_t>>({4096, 1000, 30, 8000}, {1024, 250, 30, 2000});
  const int device_rounds = scaled(10, 2);
  constexpr int kFixedSplits = 8;

  // The single-GPU runs, on device 0 from this thread.
  CUDA_CHECK(cudaSetDevice(0));
  Rng rng0(seed);
  PagedProblem single(spec, rng0);
  const PagedResult single_fixed = single.run_device(Entry::kProduction, kFixedSplits);
  const PagedResult reference = single.run_host();

  std::vector<Outcome> outcomes(2);
  std::vector<std::thread> threads;
  for (int d = 0; d < 2; ++d) {
    threads.emplace_back([&, d] {
      Outcome& out = outcomes[d];
      const std::string at = "device " + std::to_string(d) + ": ";
      CUDA_CHECK(cudaSetDevice(d));
      Rng rng(seed);  // same seed: the same problem, allocated on device d
      PagedProblem problem(spec, rng);
      for (int round = 0; round < device_rounds; ++round) {
        const PagedResult fixed = problem.run_device(Entry::kProduction, kFixedSplits);
        out.check(fixed.out_bytes == single_fixed.out_bytes && fixed.lse_bytes == single_fixed.lse_bytes,
                  at + "splits=8 differs from the single-GPU run");
        const PagedResult automatic = problem.run_device(Entry::kProduction, 0);
        out.check(within_bars(problem.compare(automatic, reference)), at + "auto splits off the reference");
        const PagedResult oracle = problem.run_device(Entry::kOracle, 0);
        out.check(within_bars(problem.compare(oracle, reference)), at + "oracle off the reference");
      }
      int current = -1;
      CUDA_CHECK(cudaGetDevice(&current));
      out.check(current == d, at + "current device changed by the library");
    });
  }
  for (auto& th : threads) th.join();
  for (const Outcome& out : outcomes) {
    report.add_case();
    for (const std::string& f : out.failures) report.check(false, "two devices: " + f);
  }
  std::printf("two devices: 2 threads, one per GPU, %d rounds each: %s\n", device_rounds,
              outcomes[0].failures.empty() && outcomes[1].failures.empty() ? "equal to the single-GPU run"
                                                                            : "DIFFER");
}

}  // namespace

int main() {
  require_gpu_or_skip("test_concurrency");
  Report report("test_concurrency");
  announce_light("test_concurrency",
                 "3 concurrent rounds instead of 25, 10 error rounds instead of 50, 2 two-GPU rounds instead of 10, "
                 "prefixes / 4");
  const uint64_t seed = test_seed();
  prepare_under_contention(report);
  concurrent_entry_points(report, seed);
  thread_local_errors(report);
  two_devices(report, seed);
  return report.finish();
}
