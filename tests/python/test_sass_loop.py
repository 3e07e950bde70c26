"""scripts/sass_loop.py's SASS parsing and loop comparison (no nvcc, no GPU): a kernel's
instructions and labels from nvdisasm text, its tile loop's bounds (to its last P V wgmma, or
to its back edge), the kernel key that pairs two trees' kernels, and how many loop
instructions changed once registers, predicates, labels and addresses are renamed away."""

import importlib.util
import pathlib

ROOT = pathlib.Path(__file__).resolve().parents[2]
spec = importlib.util.spec_from_file_location("sass_loop", ROOT / "scripts" / "sass_loop.py")
sass_loop = importlib.util.module_from_spec(spec)
spec.loader.exec_module(sass_loop)

KERNEL = "_ZN6kdtree6verify69_GLOBAL__N__38267fed_30_x_cu_50abcf78_1928334verify_paged_sm90a_pingpong_kernelI6__halfLb0ELi1EEEvNS0_9PagedArgsE"
SASS = f"""
\t.section\t.text.{KERNEL},"ax",@progbits
.text.{KERNEL}:
        /*0000*/                   LDC R1, c[0x0][0x28] ;                     /* 0x00000a00ff017b82 */
        /*0010*/                   MOV R2, 0x10 ;
.L_x_1:
        /*0020*/                   HGMMA.64x64x16.F32.BF16 R24, gdesc[UR4], R24 ;
        /*0030*/              @!P0 BRA `(.L_x_1) ;
        /*0040*/                   FMUL R3, R4, R5 ;
        /*0050*/                   HGMMA.64x256x16.F32.BF16 R40, R8, gdesc[UR8], R40 ;
        /*0060*/                   EXIT ;
"""


def test_instructions_drop_addresses_encodings_and_labels():
    labels = {}
    texts = sass_loop.instructions(SASS, labels)[KERNEL]
    assert texts == ["LDC R1, c[0x0][0x28]", "MOV R2, 0x10", "HGMMA.64x64x16.F32.BF16 R24, gdesc[UR4], R24",
                     "@!P0 BRA .L_x_1", "FMUL R3, R4, R5", "HGMMA.64x256x16.F32.BF16 R40, R8, gdesc[UR8], R40",
                     "EXIT"]
    assert labels == {KERNEL: {".L_x_1": 2}}  # the label, by the instruction after it
    assert sass_loop.instructions(SASS)[KERNEL] == texts


def test_loop_range_runs_from_the_first_qk_to_the_last_p_v_wgmma():
    ops = sass_loop.kernels(SASS)[KERNEL]
    assert sass_loop.loop_range(ops) == (2, 5)
    assert sass_loop.loop_range(["MOV", "EXIT"]) is None


# A tile loop with a P V wgmma of its own, then a short tile's P V after the loop.
AFTER_LOOP = f"""
.text.{KERNEL}:
        /*0000*/                   MOV R2, 0x10 ;
.L_x_3:
        /*0010*/                   HGMMA.64x64x16.F32.BF16 R24, gdesc[UR4], R24 ;
        /*0020*/                   HGMMA.64x256x16.F32.BF16 R40, R8, gdesc[UR8], R40 ;
        /*0030*/              @!P0 BRA `(.L_x_3) ;
        /*0040*/                   HGMMA.64x16x16.F32.BF16 R24, gdesc[UR4], R24 ;
        /*0050*/                   HGMMA.64x256x16.F32.BF16 R40, R8, gdesc[UR8], R40 ;
        /*0060*/                   EXIT ;
.L_x_4:
        /*0070*/                   BRA `(.L_x_3) ;
"""


def test_loop_range_to_the_back_edge_leaves_the_code_after_the_loop_out():
    labels = {}
    texts = sass_loop.instructions(AFTER_LOOP, labels)[KERNEL]
    ops = sass_loop.opcodes(texts)
    assert sass_loop.loop_range(ops) == (1, 5)
    # The back edge is the first backward branch after the QK (not the retry stub at the end).
    assert sass_loop.loop_range(ops, texts, labels[KERNEL]) == (1, 2)
    # Without a back edge, as without labels.
    assert sass_loop.loop_range(ops[:3], texts[:3], labels[KERNEL]) == (1, 2)
    assert sass_loop.loop_range(ops, texts, {}) == (1, 5)


def test_kernel_key_drops_the_anonymous_namespace_and_the_parameters():
    other = KERNEL.replace("38267fed", "f11264e0").replace("50abcf78", "0a368e9d")
    assert sass_loop.kernel_key(KERNEL) == sass_loop.kernel_key(other)
    assert sass_loop.kernel_key(KERNEL).endswith("pingpong_kernelI6__halfLb0ELi1EEEv")
    assert sass_loop.kernel_key(KERNEL) != sass_loop.kernel_key(KERNEL.replace("Li1E", "Li2E"))
    more = KERNEL.replace("NS0_9PagedArgsE", "NS0_9PagedArgsENS1_9KvRowsMapE")
    assert sass_loop.kernel_key(KERNEL) == sass_loop.kernel_key(more)


def test_loop_change_ignores_renumbering_and_counts_moves_and_edits():
    loop = ["HGMMA.64x64x16.F32.BF16 R24, gdesc[UR4], R24", "@!P0 BRA", "FMUL R3, R4, R5", "MUFU.EX2 R6, R3"]
    renumbered = ["HGMMA.64x64x16.F32.BF16 R26, gdesc[UR6], R26", "@!P2 BRA", "FMUL R7, R8, R9", "MUFU.EX2 R1, R7"]
    assert sass_loop.loop_change(loop, renumbered) == 0
    moved = [loop[0], loop[2], loop[1], loop[3]]     # out of its place and into another: two
    assert sass_loop.loop_change(loop, moved) == 2
    edited = loop[:2] + ["FFMA R3, R4, R5, R6"] + loop[3:]
    assert sass_loop.loop_change(loop, edited) == 1
    assert sass_loop.loop_change(loop, loop + ["NOP", "NOP"]) == 2


def test_source_ptxas_reads_the_trees_per_source_options(tmp_path):
    # The project's own CMakeLists.txt: the ping-pong kernel's options, and none for another file.
    pingpong = "src/verify/verify_paged_sm90a_pingpong.cu"
    assert sass_loop.source_ptxas(str(ROOT), pingpong) == ["-Xptxas=--register-usage-level=6"]
    assert sass_loop.source_ptxas(str(ROOT), "src/verify/verify_paged_sm90a.cu") == []
    # A tree from before the variable, and one without a CMakeLists.txt.
    (tmp_path / "CMakeLists.txt").write_text('project(x)\n')
    assert sass_loop.source_ptxas(str(tmp_path), pingpong) == []
    assert sass_loop.source_ptxas(str(tmp_path / "none"), pingpong) == []
    (tmp_path / "CMakeLists.txt").write_text('set(KDTREE_SOURCE_PTXAS_OPTIONS "a.cu:-O1;b.cu:--x=1;a.cu:--y")\n')
    assert sass_loop.source_ptxas(str(tmp_path), "a.cu") == ["-Xptxas=-O1", "-Xptxas=--y"]
