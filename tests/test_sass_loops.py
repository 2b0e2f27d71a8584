"""tools/sass_loops.py: what it reads from cuobjdump's SASS listing (no GPU, no compile)."""
import pathlib
import sys

ROOT = pathlib.Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "tools"))
import sass_loops  # noqa: E402

# Two kernels; the first has an outer loop 0x0010..0x0070 around an inner one 0x0030..0x0050, a
# forward branch (not a loop) and a guarded backward one.
LISTING = """
\tcode for sm_90
\t\tFunction : _Z1kPf
\t.headerflags\t@"EF_CUDA_VIRTUAL_SM(EF_CUDA_SM90)"
        /*0000*/                   MOV R1, c[0x0][0x28] ;                 /* 0x00000a0000017a02 */
        /*0010*/                   LDGSTS.E.BYPASS.128 [R2], desc[UR4][R4.64] ;
        /*0020*/                   BAR.SYNC.DEFER_BLOCKING 0x0 ;
        /*0030*/                   HMMA.16816.F32.BF16 R8, R12, R16, R8 ;
        /*0040*/                   LDSM.16.M88.4 R12, [R20] ;
        /*0050*/               @P0 BRA 0x30 ;
        /*0060*/               @!P1 BRA 0x90 ;
        /*0070*/                   BRA 0x10 ;
        /*0080*/                   MUFU.EX2 R3, R3 ;
        /*0090*/                   EXIT ;
\t\t..........
\t\tFunction : _Z2k2v
        /*0000*/                   EXIT ;
        /*0010*/                   BRA 0x10 ;
"""


def test_functions_and_their_instructions():
    fns = sass_loops.parse_functions(LISTING)
    assert list(fns) == ["_Z1kPf", "_Z2k2v"]
    assert len(fns["_Z1kPf"]) == 10 and fns["_Z1kPf"][5] == (0x50, "@P0 BRA 0x30")
    assert sass_loops.opcode("@!PT LDS RZ, [RZ]") == "LDS"
    assert sass_loops.opcode("HMMA.16816.F32 R8") == "HMMA.16816.F32"


def test_loops_outermost_first_with_what_they_hold():
    ins = sass_loops.parse_functions(LISTING)["_Z1kPf"]
    found = sass_loops.loops(ins)
    assert found == [(1, 7, 7), (3, 5, 3)]  # 0x10..0x70, then 0x30..0x50; the forward branch is none
    outer = sass_loops.classes(ins[1:8])
    assert outer == [("HMMA", 1), ("LDGSTS", 1), ("LDSM", 1), ("BAR", 1)]
    assert sass_loops.classes(ins[3:6]) == [("HMMA", 1), ("LDSM", 1)]
    # a branch to itself (a trap loop after EXIT) is a one-instruction loop
    assert sass_loops.loops(sass_loops.parse_functions(LISTING)["_Z2k2v"]) == [(1, 1, 1)]
