// The engine's counters, apart from the engine so that their readers (the
// metrics endpoint) need not include it.
#ifndef TEXTGEN_ENGINE_ENGINE_STATS_H_
#define TEXTGEN_ENGINE_ENGINE_STATS_H_

#include <cstdint>

namespace textgen {

// Counters for the metrics endpoint, read with Engine::stats()
// (engine/engine.h).
struct EngineStats {
  int num_slots = 0;
  int slots_in_use = 0;
  int queue_depth = 0;        // Submitted, not yet in a slot.
  int last_batch_size = 0;    // Sequences in the most recent step.
  int64_t steps = 0;          // Forward passes run.
  int64_t prompt_tokens = 0;  // Prompt tokens fed to the model.
  int64_t source_tokens = 0;  // Source tokens encoded (encoder–decoder).
  int64_t generated_tokens = 0;
  // Requests by how they ended.
  int64_t finished_length = 0;
  int64_t finished_stop = 0;
  int64_t finished_eos = 0;
  int64_t finished_context_full = 0;
  int64_t cancelled = 0;  // Including streams dropped by their consumer.
  int64_t deadline_exceeded = 0;
  int64_t shut_down = 0;  // Still running or queued when the engine stopped.
  int64_t failed = 0;     // An internal error (the model refused a batch).
  // Requests refused by Submit.
  int64_t rejected_queue_full = 0;
  int64_t rejected_invalid = 0;
  // Needing more KV blocks than one client's share alone
  // (EngineOptions::client_max_kv_fraction).
  int64_t rejected_client_share = 0;
  // The KV cache's blocks by state (model/kv_cache.h): used + cached + free =
  // total.
  int kv_blocks_total = 0;
  int kv_blocks_used = 0;
  int kv_blocks_cached = 0;
  int kv_blocks_free = 0;
  // Prompt tokens of admitted requests that looked up the prefix cache, and
  // those of them found cached (not computed): hits / lookups is the hit
  // ratio.
  int64_t prefix_cache_lookup_tokens = 0;
  int64_t prefix_cache_hit_tokens = 0;
  // Speculative decoding (engine/speculation.h): tokens proposed and
  // verified, and those of them accepted (sampled as proposed): accepted /
  // proposed is the acceptance rate.
  int64_t spec_proposed_tokens = 0;
  int64_t spec_accepted_tokens = 0;
};

}  // namespace textgen

#endif  // TEXTGEN_ENGINE_ENGINE_STATS_H_
