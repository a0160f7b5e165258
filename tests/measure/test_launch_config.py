"""Contract settings parsed from command lines shaped like the seeds' (Megatron-LM options and
Megatron Bridge ``key=value`` overrides)."""

from __future__ import annotations

from nsysmoe.measure.launch import contract_config

BRIDGE = ("uv run python scripts/performance/run_script.py -m qwen -mr qwen3_30b_a3b --task "
          "pretrain -g h100 -c bf16 -ng 16 -gn 8 --max_steps 8 --cuda_graph_impl none "
          "--moe_flex_dispatcher_backend None --moe_a2a_overlap false --tokenizer_type "
          "NullTokenizer comm_overlap.overlap_moe_expert_parallel_comm=true "
          "comm_overlap.delay_wgrad_compute=false model.moe_shared_expert_overlap=false").split()
MEGATRON = ("torchrun --nproc_per_node 8 pretrain_gpt.py --tensor-model-parallel-size 1 "
            "--pipeline-model-parallel-size 1 --expert-model-parallel-size 16 --bf16 "
            "--moe-token-dispatcher-type flex --moe-flex-dispatcher-backend hybridep "
            "--moe-hybridep-num-sms 16 --cuda-graph-scope moe_router moe_preprocess "
            "--moe-router-force-load-balancing --micro-batch-size 1 --global-batch-size 1024 "
            "--seq-length 4096 --overlap-moe-expert-parallel-comm --delay-wgrad-compute").split()


def test_bridge_overrides_and_options() -> None:
    c = contract_config(BRIDGE)
    assert c["overlap_moe_expert_parallel_comm"] == "true"
    assert c["delay_wgrad_compute"] == "false"
    assert c["moe_shared_expert_overlap"] == "false"
    assert c["flex_backend"] == "None" and c["cuda_graph_impl"] == "none"
    assert "moe_a2a_overlap" not in c  # not a contract key


def test_megatron_options_flags_and_lists() -> None:
    c = contract_config(MEGATRON)
    assert (c["tp"], c["pp"], c["ep"]) == ("1", "1", "16")
    assert c["bf16"] == "true" and c["dispatcher"] == "flex" and c["flex_backend"] == "hybridep"
    assert c["cuda_graph_scope"] == "moe_router moe_preprocess"
    assert c["moe_router_force_load_balancing"] == "true"
    assert (c["micro_batch_size"], c["global_batch_size"], c["seq_length"]) == ("1", "1024",
                                                                                 "4096")
    assert c["overlap_moe_expert_parallel_comm"] == "true" and c["delay_wgrad_compute"] == "true"


def test_equals_form_and_last_value_wins() -> None:
    c = contract_config(["x.py", "--expert-model-parallel-size=8", "--ep-size", "2",
                         "--expert-model-parallel-size=4"])  # fmt: skip
    assert c == {"ep": "4"}
    assert contract_config([]) == {}
