#!/usr/bin/env python3
"""tools/sass_loops.py on a hand-written SASS listing: of two nested loops, the inner one that
holds the marker is counted, branched-around instructions included, with its LDS and S2R; two
disjoint loops that hold it are two lines; --arch keeps the code for one architecture of a
listing that has several; a kernel the file lacks is one line and exit 1.
Usage: check_sass_loops.py"""
import os
import subprocess
import sys
import tempfile

SASS = """
        Function : _Z6decodev
        /*0000*/                   MOV R1, c[0x0][0x28] ;
        /*0010*/                   S2R R2, SR_TID.X ;
        /*0020*/                   LDS R3, [R2] ;
        /*0030*/                   LOP3.LUT R4, R3, 0xffc, RZ, 0xc0, !PT ;
        /*0040*/               @P0 BRA 0x60 ;
        /*0050*/                   LDS.U16 R5, [R4] ;
        /*0060*/                   IADD3 R6, R6, 0x1, RZ ;
        /*0070*/                   ISETP.GE.AND P1, PT, R6, 0x10, PT ;
        /*0080*/              @!P1 BRA 0x20 ;
        /*0090*/                   IADD3 R7, R7, 0x1, RZ ;
        /*00a0*/              @!P1 BRA 0x90 ;
        /*00b0*/                   BRA.DIV UR4, 0x0 ;
        /*00c0*/                   EXIT ;
        Function : _Z5otherv
        /*0000*/                   EXIT ;
"""
tool = [sys.executable, "tools/sass_loops.py"]
with tempfile.TemporaryDirectory() as tmp:
    f = os.path.join(tmp, "k.sass")
    open(f, "w").write(SASS)
    r = subprocess.run(tool + [f, "--kernel", "_Z6decodev", "--marker", "0xffc"], capture_output=True, text=True)
    print(r.stdout, end="")
    want = "_Z6decodev: loop at 0x20: 7 instructions, 2 LDS, 0 S2R/S2UR"
    if r.returncode != 0 or r.stdout.strip() != want:
        sys.exit(f"FAILED: {r.stdout!r} {r.stderr!r}, want {want!r}")
    # The loop from 0x0 holds an S2R: a marker only it holds picks it (9 instructions).
    open(f, "w").write(SASS.replace("/*0080*/              @!P1 BRA 0x20", "/*0080*/              @!P1 BRA 0x0"))
    r = subprocess.run(tool + [f, "--kernel", "decode", "--marker", "0xffc"], capture_output=True, text=True)
    if "loop at 0x0: 9 instructions, 2 LDS, 1 S2R/S2UR" not in r.stdout:
        sys.exit(f"FAILED: the loop from 0x0: {r.stdout!r}")
    # A second loop that holds the marker after the first: both, in address order.
    open(f, "w").write(SASS.replace("/*0090*/                   IADD3 R7, R7, 0x1, RZ",
                                    "/*0090*/                   LOP3.LUT R7, R7, 0xffc, RZ, 0xc0, !PT"))
    r = subprocess.run(tool + [f, "--kernel", "_Z6decodev", "--marker", "0xffc"], capture_output=True, text=True)
    want2 = want + "\n_Z6decodev: loop at 0x90: 2 instructions, 0 LDS, 0 S2R/S2UR"
    if r.returncode != 0 or r.stdout.strip() != want2:
        sys.exit(f"FAILED: two loops: {r.stdout!r}, want {want2!r}")
    # Two architectures' code (cuobjdump's "code for sm_NN" before each): --arch keeps one.
    sm90 = SASS.replace("/*0070*/                   ISETP.GE.AND P1, PT, R6, 0x10, PT ;",
                        "/*0070*/                   ISETP.GE.AND P1, PT, R6, 0x10, PT ;\n        /*0078*/                   NOP ;")
    open(f, "w").write("\n\tcode for sm_80\n" + SASS + "\n\tcode for sm_90\n" + sm90)
    r = subprocess.run(tool + [f, "--kernel", "_Z6decodev", "--marker", "0xffc", "--arch", "sm_90"],
                       capture_output=True, text=True)
    if r.returncode != 0 or r.stdout.strip() != "_Z6decodev: loop at 0x20: 8 instructions, 2 LDS, 0 S2R/S2UR":
        sys.exit(f"FAILED: --arch sm_90: {r.stdout!r} {r.stderr!r}")
    r = subprocess.run(tool + [f, "--kernel", "_Z6decodev", "--marker", "0xffc"], capture_output=True, text=True)
    if r.stdout.count("loop at 0x20") != 2:
        sys.exit(f"FAILED: both architectures without --arch: {r.stdout!r}")
    r = subprocess.run(tool + [f, "--kernel", "_Z6decodev", "--marker", "0xffc", "--arch", "sm_100"],
                       capture_output=True, text=True)
    if r.returncode != 1 or "sm_100" not in r.stderr:
        sys.exit(f"FAILED: an architecture the file lacks: exit {r.returncode}, {r.stderr!r}")
    r = subprocess.run(tool + [f, "--kernel", "_Z5otherv", "--marker", "0xffc"], capture_output=True, text=True)
    if r.returncode != 0 or "no loop holds 0xffc" not in r.stdout:
        sys.exit(f"FAILED: a function with no loop: {r.stdout!r}")
    r = subprocess.run(tool + [f, "--kernel", "absent", "--marker", "0xffc"], capture_output=True, text=True)
    if r.returncode != 1 or "absent" not in r.stderr or r.stderr.count("\n") != 1 or "Traceback" in r.stderr:
        sys.exit(f"FAILED: an absent kernel: exit {r.returncode}, {r.stderr!r}")
print("OK")
