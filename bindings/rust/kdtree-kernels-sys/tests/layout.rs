//! The hand-written declarations against the real header (libz-sys systest in
//! miniature): one list of structs/fields and constants generates a C program,
//! compiled with `cc` from PATH, that prints sizeof/offsetof/values; the same
//! list gives the Rust side through size_of/offset_of!. Any drift fails here.
use kdtree_kernels_sys::*;
use std::collections::BTreeMap;
use std::mem::{offset_of, size_of};
use std::path::PathBuf;
use std::process::Command;

macro_rules! layouts {
    ($($s:ident { $($f:ident),* $(,)? })*) => {{
        let mut c = String::new();
        let mut rust = BTreeMap::new();
        $(
            c.push_str(&format!("  printf(\"sizeof {0} %zu\\n\", sizeof({0}));\n",
                                stringify!($s)));
            rust.insert(format!("sizeof {}", stringify!($s)), size_of::<$s>() as i64);
            $(
                c.push_str(&format!(
                    "  printf(\"offsetof {0}.{1} %zu\\n\", offsetof({0}, {1}));\n",
                    stringify!($s), stringify!($f)));
                rust.insert(format!("offsetof {}.{}", stringify!($s), stringify!($f)),
                            offset_of!($s, $f) as i64);
            )*
        )*
        (c, rust)
    }};
}

macro_rules! constants {
    ($c:ident, $rust:ident; $($name:ident = $value:expr),* $(,)?) => {$(
        $c.push_str(&format!("  printf(\"const {0} %lld\\n\", (long long)({0}));\n",
                             stringify!($name)));
        $rust.insert(format!("const {}", stringify!($name)), ($value) as i64);
    )*};
}

#[test]
fn rust_declarations_match_the_c_header() {
    let (mut body, mut rust) = layouts! {
        kdtree_verify_paged_params {
            struct_size, batch_size, num_heads, head_dim_latent, head_dim_rope, max_q_len,
            total_q, max_kv_len, num_splits, sm_scale, q, q_dtype, reserved0, q_stride_token,
            q_stride_head, kv_cache, kv_dtype, kv_scale, kv_stride_slot, num_slots, qo_indptr,
            kv_indptr, kv_indices, index_dtype, tail_source, tail_kv, tail_kv_stride,
            mask_kind, reserved1, mask, mask_indptr, mask_row_bytes, out, out_dtype,
            reserved2, out_stride_token, out_stride_head, lse, error_flag,
        }
        kdtree_verify_contiguous_params {
            struct_size, num_heads, head_dim_latent, head_dim_rope, q_len, dtype, kv_len,
            sm_scale, mask_kind, q, q_stride_token, q_stride_head, kv, kv_stride, mask,
            mask_row_bytes, out, out_dtype, reserved0, out_stride_token, out_stride_head, lse,
        }
        kdtree_merge_params {
            struct_size, num_states, num_tokens, num_heads, head_dim, states, states_dtype,
            reserved0, states_stride_state, states_stride_token, states_stride_head,
            states_lse, out, out_dtype, reserved1, out_stride_token, out_stride_head, lse,
        }
        kdtree_defrag_copy_params {
            struct_size, num_layers, layer_base, slot_stride_bytes, row_bytes, num_slots,
            src_slots, dst_slots, index_dtype, reserved0, max_moves, num_moves, error_flag,
        }
        kdtree_defrag_remap_params {
            struct_size, table_dtype, table, rows, cols, row_stride, row_lengths, num_slots,
            src_slots, dst_slots, index_dtype, reserved0, max_moves, num_moves, error_flag,
        }
        kdtree_defrag_plan_params {
            struct_size, reserved0, num_slots, num_requests, request_indptr, request_slots,
            free_slots, num_free, pinned_slots, num_pinned, reserved_slots, num_reserved,
            budget, move_src, move_dst, num_moves,
        }
        kdtree_fragmentation_stats {
            struct_size, reserved0, num_requests, total_slots, total_runs, max_runs,
            mean_run_length, largest_free_run, num_free,
        }
    };
    constants!(body, rust;
        KDTREE_VERSION_MAJOR = KDTREE_VERSION_MAJOR,
        KDTREE_VERSION_MINOR = KDTREE_VERSION_MINOR,
        KDTREE_VERSION_PATCH = KDTREE_VERSION_PATCH,
        KDTREE_VERSION_NUMBER = KDTREE_VERSION_NUMBER,
        KDTREE_ABI_VERSION = KDTREE_ABI_VERSION,
        KDTREE_OK = Status::OK.0,
        KDTREE_ERROR_INVALID_ARGUMENT = Status::INVALID_ARGUMENT.0,
        KDTREE_ERROR_UNSUPPORTED = Status::UNSUPPORTED.0,
        KDTREE_ERROR_MISALIGNED = Status::MISALIGNED.0,
        KDTREE_ERROR_WORKSPACE_TOO_SMALL = Status::WORKSPACE_TOO_SMALL.0,
        KDTREE_ERROR_STRUCT_VERSION = Status::STRUCT_VERSION.0,
        KDTREE_ERROR_NO_DEVICE = Status::NO_DEVICE.0,
        KDTREE_ERROR_ARCH_NOT_BUILT = Status::ARCH_NOT_BUILT.0,
        KDTREE_ERROR_CUDA = Status::CUDA.0,
        KDTREE_ERROR_INTERNAL = Status::INTERNAL.0,
        KDTREE_FLAG_SLOT_OUT_OF_RANGE = KDTREE_FLAG_SLOT_OUT_OF_RANGE,
        KDTREE_FLAG_KV_SHORTER_THAN_Q = KDTREE_FLAG_KV_SHORTER_THAN_Q,
        KDTREE_FLAG_BAD_INDPTR = KDTREE_FLAG_BAD_INDPTR,
        KDTREE_DTYPE_F32 = KDTREE_DTYPE_F32,
        KDTREE_DTYPE_BF16 = KDTREE_DTYPE_BF16,
        KDTREE_DTYPE_F16 = KDTREE_DTYPE_F16,
        KDTREE_DTYPE_FP8_E4M3 = KDTREE_DTYPE_FP8_E4M3,
        KDTREE_DTYPE_INT32 = KDTREE_DTYPE_INT32,
        KDTREE_DTYPE_INT64 = KDTREE_DTYPE_INT64,
        KDTREE_MASK_NONE = KDTREE_MASK_NONE,
        KDTREE_MASK_CAUSAL = KDTREE_MASK_CAUSAL,
        KDTREE_MASK_TREE_DENSE = KDTREE_MASK_TREE_DENSE,
        KDTREE_MASK_TREE_BITS = KDTREE_MASK_TREE_BITS,
        KDTREE_MASK_SGLANG_FULL = KDTREE_MASK_SGLANG_FULL,
        KDTREE_TAIL_FROM_INDICES = KDTREE_TAIL_FROM_INDICES,
        KDTREE_TAIL_FROM_EXTEND = KDTREE_TAIL_FROM_EXTEND,
    );
    for (c_type, rust_size) in [
        ("kdtree_stream_t", size_of::<kdtree_stream_t>()),
        ("kdtree_status", size_of::<Status>()),
    ] {
        body.push_str(&format!("  printf(\"sizeof {c_type} %zu\\n\", sizeof({c_type}));\n"));
        rust.insert(format!("sizeof {c_type}"), rust_size as i64);
    }

    let manifest = PathBuf::from(env!("CARGO_MANIFEST_DIR"));
    let include = manifest.join("../../../include");
    let dir = PathBuf::from(env!("CARGO_TARGET_TMPDIR"));
    let src = dir.join("kdtree_layout.c");
    let exe = dir.join("kdtree_layout");
    let program = format!(
        "#include <stddef.h>\n#include <stdio.h>\n#include \"kdtree_kernels.h\"\n\
         int main(void) {{\n{body}  printf(\"const version_string %s\\n\", \
         KDTREE_VERSION_STRING);\n  return 0;\n}}\n"
    );
    std::fs::write(&src, program).unwrap();
    let cc = std::env::var("CC").unwrap_or_else(|_| "cc".into());
    let status = Command::new(&cc)
        .args(["-std=c99", "-Wall", "-Werror", "-I"])
        .arg(&include)
        .arg(&src)
        .arg("-o")
        .arg(&exe)
        .status()
        .unwrap_or_else(|e| panic!("cannot run {cc}: {e}"));
    assert!(status.success(), "{cc} failed on the layout program");
    let output = Command::new(&exe).output().unwrap();
    assert!(output.status.success());
    let text = String::from_utf8(output.stdout).unwrap();

    let mut seen = 0;
    for line in text.lines() {
        let (key, value) = line.rsplit_once(' ').unwrap();
        if key == "const version_string" {
            assert_eq!(value, KDTREE_VERSION_STRING);
            continue;
        }
        let c_value: i64 = value.parse().unwrap();
        let rust_value = rust.get(key).unwrap_or_else(|| panic!("{key} not mirrored"));
        assert_eq!(*rust_value, c_value, "{key}: Rust {rust_value}, C {c_value}");
        seen += 1;
    }
    assert_eq!(seen, rust.len(), "the C program printed {seen} of {} entries", rust.len());
}
