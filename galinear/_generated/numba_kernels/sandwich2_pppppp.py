"""Generated kernel: double simple-rotor sandwich out = R x ~S in Cl(6,0,0), metric (1, 1, 1, 1, 1, 1), shortlex blade order.

spec:       KernelSpec(op='sandwich2', metric=(1, 1, 1, 1, 1, 1))
target:     numba
generator:  galinear.symbolic.codegen (from galinear.symbolic.spec)
regenerate: galinear codegen --op sandwich2 --n 6 --target numba --out galinear/_generated/numba_kernels
            (or `galinear codegen --all` / `make codegen` for every shipped kernel)

Do not edit by hand.
"""

import numpy as np

from galinear._numba import jit


@jit
def kernel(r, s, x, out):
    """double simple-rotor sandwich out = R x ~S in Cl(6,0,0), metric (1, 1, 1, 1, 1, 1), shortlex blade order; see galinear._generated for the signature."""
    if r.shape[1] != 16 or s.shape[1] != 16 or x.shape[1] != 64 or out.shape[1] != 64:
        raise ValueError("wrong row widths: expected r: 16, s: 16, x: 64, out: 64")
    if r.shape[0] != out.shape[0] or s.shape[0] != out.shape[0] or x.shape[0] != out.shape[0]:
        raise ValueError("all arguments need the same batch size (axis 0)")
    nrows = out.shape[0]
    r_t = np.empty((16, 64), dtype=r.dtype)
    s_t = np.empty((16, 64), dtype=s.dtype)
    x_t = np.empty((64, 64), dtype=x.dtype)
    out_t = np.empty((64, 64), dtype=out.dtype)
    probe = out.dtype.type(0.0)  # stays 0 unless an input entry is inf or nan
    for start in range(0, nrows, 64):
        count = min(64, nrows - start)
        for row in range(count):
            for col in range(16):
                value = r[start + row, col]
                r_t[col, row] = value
                probe += value - value
            for col in range(16):
                value = s[start + row, col]
                s_t[col, row] = value
                probe += value - value
            for col in range(64):
                value = x[start + row, col]
                x_t[col, row] = value
                probe += value - value
        for row in range(count):
            # --- straight-line body ---
            r0 = r_t[0, row]
            r1 = r_t[1, row]
            r2 = r_t[2, row]
            r3 = r_t[3, row]
            r4 = r_t[4, row]
            r5 = r_t[5, row]
            r6 = r_t[6, row]
            r7 = r_t[7, row]
            r8 = r_t[8, row]
            r9 = r_t[9, row]
            r10 = r_t[10, row]
            r11 = r_t[11, row]
            r12 = r_t[12, row]
            r13 = r_t[13, row]
            r14 = r_t[14, row]
            r15 = r_t[15, row]
            s0 = s_t[0, row]
            s1 = s_t[1, row]
            s2 = s_t[2, row]
            s3 = s_t[3, row]
            s4 = s_t[4, row]
            s5 = s_t[5, row]
            s6 = s_t[6, row]
            s7 = s_t[7, row]
            s8 = s_t[8, row]
            s9 = s_t[9, row]
            s10 = s_t[10, row]
            s11 = s_t[11, row]
            s12 = s_t[12, row]
            s13 = s_t[13, row]
            s14 = s_t[14, row]
            s15 = s_t[15, row]
            x0 = x_t[0, row]
            x1 = x_t[1, row]
            x2 = x_t[2, row]
            x3 = x_t[3, row]
            x4 = x_t[4, row]
            x5 = x_t[5, row]
            x6 = x_t[6, row]
            x7 = x_t[7, row]
            x8 = x_t[8, row]
            x9 = x_t[9, row]
            x10 = x_t[10, row]
            x11 = x_t[11, row]
            x12 = x_t[12, row]
            x13 = x_t[13, row]
            x14 = x_t[14, row]
            x15 = x_t[15, row]
            x16 = x_t[16, row]
            x17 = x_t[17, row]
            x18 = x_t[18, row]
            x19 = x_t[19, row]
            x20 = x_t[20, row]
            x21 = x_t[21, row]
            x22 = x_t[22, row]
            x23 = x_t[23, row]
            x24 = x_t[24, row]
            x25 = x_t[25, row]
            x26 = x_t[26, row]
            x27 = x_t[27, row]
            x28 = x_t[28, row]
            x29 = x_t[29, row]
            x30 = x_t[30, row]
            x31 = x_t[31, row]
            x32 = x_t[32, row]
            x33 = x_t[33, row]
            x34 = x_t[34, row]
            x35 = x_t[35, row]
            x36 = x_t[36, row]
            x37 = x_t[37, row]
            x38 = x_t[38, row]
            x39 = x_t[39, row]
            x40 = x_t[40, row]
            x41 = x_t[41, row]
            x42 = x_t[42, row]
            x43 = x_t[43, row]
            x44 = x_t[44, row]
            x45 = x_t[45, row]
            x46 = x_t[46, row]
            x47 = x_t[47, row]
            x48 = x_t[48, row]
            x49 = x_t[49, row]
            x50 = x_t[50, row]
            x51 = x_t[51, row]
            x52 = x_t[52, row]
            x53 = x_t[53, row]
            x54 = x_t[54, row]
            x55 = x_t[55, row]
            x56 = x_t[56, row]
            x57 = x_t[57, row]
            x58 = x_t[58, row]
            x59 = x_t[59, row]
            x60 = x_t[60, row]
            x61 = x_t[61, row]
            x62 = x_t[62, row]
            x63 = x_t[63, row]
            t0 = r0*x0 - r1*x7 - r10*x16 - r11*x17 - r12*x18 - r13*x19 - r14*x20 - r15*x21 - r2*x8 - r3*x9 - r4*x10 - r5*x11 - r6*x12 - r7*x13 - r8*x14 - r9*x15
            t1 = r0*x1 + r1*x2 - r10*x26 - r11*x27 - r12*x28 - r13*x29 - r14*x30 - r15*x31 + r2*x3 + r3*x4 + r4*x5 + r5*x6 - r6*x22 - r7*x23 - r8*x24 - r9*x25
            t2 = r0*x2 - r1*x1 - r10*x32 - r11*x33 - r12*x34 - r13*x35 - r14*x36 - r15*x37 + r2*x22 + r3*x23 + r4*x24 + r5*x25 + r6*x3 + r7*x4 + r8*x5 + r9*x6
            t3 = r0*x3 - r1*x22 + r10*x4 + r11*x5 + r12*x6 - r13*x38 - r14*x39 - r15*x40 - r2*x1 + r3*x26 + r4*x27 + r5*x28 - r6*x2 + r7*x32 + r8*x33 + r9*x34
            t4 = r0*x4 - r1*x23 - r10*x3 + r11*x38 + r12*x39 + r13*x5 + r14*x6 - r15*x41 - r2*x26 - r3*x1 + r4*x29 + r5*x30 - r6*x32 - r7*x2 + r8*x35 + r9*x36
            t5 = r0*x5 - r1*x24 - r10*x38 - r11*x3 + r12*x40 - r13*x4 + r14*x41 + r15*x6 - r2*x27 - r3*x29 - r4*x1 + r5*x31 - r6*x33 - r7*x35 - r8*x2 + r9*x37
            t6 = r0*x6 - r1*x25 - r10*x39 - r11*x40 - r12*x3 - r13*x41 - r14*x4 - r15*x5 - r2*x28 - r3*x30 - r4*x31 - r5*x1 - r6*x34 - r7*x36 - r8*x37 - r9*x2
            t7 = r0*x7 + r1*x0 - r10*x42 - r11*x43 - r12*x44 - r13*x45 - r14*x46 - r15*x47 - r2*x12 - r3*x13 - r4*x14 - r5*x15 + r6*x8 + r7*x9 + r8*x10 + r9*x11
            t8 = r0*x8 + r1*x12 + r10*x9 + r11*x10 + r12*x11 - r13*x48 - r14*x49 - r15*x50 + r2*x0 - r3*x16 - r4*x17 - r5*x18 - r6*x7 + r7*x42 + r8*x43 + r9*x44
            t9 = r0*x9 + r1*x13 - r10*x8 + r11*x48 + r12*x49 + r13*x10 + r14*x11 - r15*x51 + r2*x16 + r3*x0 - r4*x19 - r5*x20 - r6*x42 - r7*x7 + r8*x45 + r9*x46
            t10 = r0*x10 + r1*x14 - r10*x48 - r11*x8 + r12*x50 - r13*x9 + r14*x51 + r15*x11 + r2*x17 + r3*x19 + r4*x0 - r5*x21 - r6*x43 - r7*x45 - r8*x7 + r9*x47
            t11 = r0*x11 + r1*x15 - r10*x49 - r11*x50 - r12*x8 - r13*x51 - r14*x9 - r15*x10 + r2*x18 + r3*x20 + r4*x21 + r5*x0 - r6*x44 - r7*x46 - r8*x47 - r9*x7
            t12 = r0*x12 - r1*x8 + r10*x13 + r11*x14 + r12*x15 - r13*x52 - r14*x53 - r15*x54 + r2*x7 - r3*x42 - r4*x43 - r5*x44 + r6*x0 - r7*x16 - r8*x17 - r9*x18
            t13 = r0*x13 - r1*x9 - r10*x12 + r11*x52 + r12*x53 + r13*x14 + r14*x15 - r15*x55 + r2*x42 + r3*x7 - r4*x45 - r5*x46 + r6*x16 + r7*x0 - r8*x19 - r9*x20
            t14 = r0*x14 - r1*x10 - r10*x52 - r11*x12 + r12*x54 - r13*x13 + r14*x55 + r15*x15 + r2*x43 + r3*x45 + r4*x7 - r5*x47 + r6*x17 + r7*x19 + r8*x0 - r9*x21
            t15 = r0*x15 - r1*x11 - r10*x53 - r11*x54 - r12*x12 - r13*x55 - r14*x13 - r15*x14 + r2*x44 + r3*x46 + r4*x47 + r5*x7 + r6*x18 + r7*x20 + r8*x21 + r9*x0
            t16 = r0*x16 - r1*x42 + r10*x0 - r11*x19 - r12*x20 + r13*x17 + r14*x18 - r15*x56 - r2*x9 + r3*x8 - r4*x48 - r5*x49 - r6*x13 + r7*x12 - r8*x52 - r9*x53
            t17 = r0*x17 - r1*x43 + r10*x19 + r11*x0 - r12*x21 - r13*x16 + r14*x56 + r15*x18 - r2*x10 + r3*x48 + r4*x8 - r5*x50 - r6*x14 + r7*x52 + r8*x12 - r9*x54
            t18 = r0*x18 - r1*x44 + r10*x20 + r11*x21 + r12*x0 - r13*x56 - r14*x16 - r15*x17 - r2*x11 + r3*x49 + r4*x50 + r5*x8 - r6*x15 + r7*x53 + r8*x54 + r9*x12
            t19 = r0*x19 - r1*x45 - r10*x17 + r11*x16 - r12*x56 + r13*x0 - r14*x21 + r15*x20 - r2*x48 - r3*x10 + r4*x9 - r5*x51 - r6*x52 - r7*x14 + r8*x13 - r9*x55
            t20 = r0*x20 - r1*x46 - r10*x18 + r11*x56 + r12*x16 + r13*x21 + r14*x0 - r15*x19 - r2*x49 - r3*x11 + r4*x51 + r5*x9 - r6*x53 - r7*x15 + r8*x55 + r9*x13
            t21 = r0*x21 - r1*x47 - r10*x56 - r11*x18 + r12*x17 - r13*x20 + r14*x19 + r15*x0 - r2*x50 - r3*x51 - r4*x11 + r5*x10 - r6*x54 - r7*x55 - r8*x15 + r9*x14
            t22 = r0*x22 + r1*x3 + r10*x23 + r11*x24 + r12*x25 - r13*x57 - r14*x58 - r15*x59 - r2*x2 + r3*x32 + r4*x33 + r5*x34 + r6*x1 - r7*x26 - r8*x27 - r9*x28
            t23 = r0*x23 + r1*x4 - r10*x22 + r11*x57 + r12*x58 + r13*x24 + r14*x25 - r15*x60 - r2*x32 - r3*x2 + r4*x35 + r5*x36 + r6*x26 + r7*x1 - r8*x29 - r9*x30
            t24 = r0*x24 + r1*x5 - r10*x57 - r11*x22 + r12*x59 - r13*x23 + r14*x60 + r15*x25 - r2*x33 - r3*x35 - r4*x2 + r5*x37 + r6*x27 + r7*x29 + r8*x1 - r9*x31
            t25 = r0*x25 + r1*x6 - r10*x58 - r11*x59 - r12*x22 - r13*x60 - r14*x23 - r15*x24 - r2*x34 - r3*x36 - r4*x37 - r5*x2 + r6*x28 + r7*x30 + r8*x31 + r9*x1
            t26 = r0*x26 + r1*x32 + r10*x1 - r11*x29 - r12*x30 + r13*x27 + r14*x28 - r15*x61 + r2*x4 - r3*x3 + r4*x38 + r5*x39 - r6*x23 + r7*x22 - r8*x57 - r9*x58
            t27 = r0*x27 + r1*x33 + r10*x29 + r11*x1 - r12*x31 - r13*x26 + r14*x61 + r15*x28 + r2*x5 - r3*x38 - r4*x3 + r5*x40 - r6*x24 + r7*x57 + r8*x22 - r9*x59
            t28 = r0*x28 + r1*x34 + r10*x30 + r11*x31 + r12*x1 - r13*x61 - r14*x26 - r15*x27 + r2*x6 - r3*x39 - r4*x40 - r5*x3 - r6*x25 + r7*x58 + r8*x59 + r9*x22
            t29 = r0*x29 + r1*x35 - r10*x27 + r11*x26 - r12*x61 + r13*x1 - r14*x31 + r15*x30 + r2*x38 + r3*x5 - r4*x4 + r5*x41 - r6*x57 - r7*x24 + r8*x23 - r9*x60
            t30 = r0*x30 + r1*x36 - r10*x28 + r11*x61 + r12*x26 + r13*x31 + r14*x1 - r15*x29 + r2*x39 + r3*x6 - r4*x41 - r5*x4 - r6*x58 - r7*x25 + r8*x60 + r9*x23
            t31 = r0*x31 + r1*x37 - r10*x61 - r11*x28 + r12*x27 - r13*x30 + r14*x29 + r15*x1 + r2*x40 + r3*x41 + r4*x6 - r5*x5 - r6*x59 - r7*x60 - r8*x25 + r9*x24
            t32 = r0*x32 - r1*x26 + r10*x2 - r11*x35 - r12*x36 + r13*x33 + r14*x34 - r15*x62 + r2*x23 - r3*x22 + r4*x57 + r5*x58 + r6*x4 - r7*x3 + r8*x38 + r9*x39
            t33 = r0*x33 - r1*x27 + r10*x35 + r11*x2 - r12*x37 - r13*x32 + r14*x62 + r15*x34 + r2*x24 - r3*x57 - r4*x22 + r5*x59 + r6*x5 - r7*x38 - r8*x3 + r9*x40
            t34 = r0*x34 - r1*x28 + r10*x36 + r11*x37 + r12*x2 - r13*x62 - r14*x32 - r15*x33 + r2*x25 - r3*x58 - r4*x59 - r5*x22 + r6*x6 - r7*x39 - r8*x40 - r9*x3
            t35 = r0*x35 - r1*x29 - r10*x33 + r11*x32 - r12*x62 + r13*x2 - r14*x37 + r15*x36 + r2*x57 + r3*x24 - r4*x23 + r5*x60 + r6*x38 + r7*x5 - r8*x4 + r9*x41
            t36 = r0*x36 - r1*x30 - r10*x34 + r11*x62 + r12*x32 + r13*x37 + r14*x2 - r15*x35 + r2*x58 + r3*x25 - r4*x60 - r5*x23 + r6*x39 + r7*x6 - r8*x41 - r9*x4
            t37 = r0*x37 - r1*x31 - r10*x62 - r11*x34 + r12*x33 - r13*x36 + r14*x35 + r15*x2 + r2*x59 + r3*x60 + r4*x25 - r5*x24 + r6*x40 + r7*x41 + r8*x6 - r9*x5
            t38 = r0*x38 - r1*x57 + r10*x5 - r11*x4 + r12*x41 + r13*x3 - r14*x40 + r15*x39 - r2*x29 + r3*x27 - r4*x26 + r5*x61 - r6*x35 + r7*x33 - r8*x32 + r9*x62
            t39 = r0*x39 - r1*x58 + r10*x6 - r11*x41 - r12*x4 + r13*x40 + r14*x3 - r15*x38 - r2*x30 + r3*x28 - r4*x61 - r5*x26 - r6*x36 + r7*x34 - r8*x62 - r9*x32
            t40 = r0*x40 - r1*x59 + r10*x41 + r11*x6 - r12*x5 - r13*x39 + r14*x38 + r15*x3 - r2*x31 + r3*x61 + r4*x28 - r5*x27 - r6*x37 + r7*x62 + r8*x34 - r9*x33
            t41 = r0*x41 - r1*x60 - r10*x40 + r11*x39 - r12*x38 + r13*x6 - r14*x5 + r15*x4 - r2*x61 - r3*x31 + r4*x30 - r5*x29 - r6*x62 - r7*x37 + r8*x36 - r9*x35
            t42 = r0*x42 + r1*x16 + r10*x7 - r11*x45 - r12*x46 + r13*x43 + r14*x44 - r15*x63 - r2*x13 + r3*x12 - r4*x52 - r5*x53 + r6*x9 - r7*x8 + r8*x48 + r9*x49
            t43 = r0*x43 + r1*x17 + r10*x45 + r11*x7 - r12*x47 - r13*x42 + r14*x63 + r15*x44 - r2*x14 + r3*x52 + r4*x12 - r5*x54 + r6*x10 - r7*x48 - r8*x8 + r9*x50
            t44 = r0*x44 + r1*x18 + r10*x46 + r11*x47 + r12*x7 - r13*x63 - r14*x42 - r15*x43 - r2*x15 + r3*x53 + r4*x54 + r5*x12 + r6*x11 - r7*x49 - r8*x50 - r9*x8
            t45 = r0*x45 + r1*x19 - r10*x43 + r11*x42 - r12*x63 + r13*x7 - r14*x47 + r15*x46 - r2*x52 - r3*x14 + r4*x13 - r5*x55 + r6*x48 + r7*x10 - r8*x9 + r9*x51
            t46 = r0*x46 + r1*x20 - r10*x44 + r11*x63 + r12*x42 + r13*x47 + r14*x7 - r15*x45 - r2*x53 - r3*x15 + r4*x55 + r5*x13 + r6*x49 + r7*x11 - r8*x51 - r9*x9
            t47 = r0*x47 + r1*x21 - r10*x63 - r11*x44 + r12*x43 - r13*x46 + r14*x45 + r15*x7 - r2*x54 - r3*x55 - r4*x15 + r5*x14 + r6*x50 + r7*x51 + r8*x11 - r9*x10
            t48 = r0*x48 + r1*x52 + r10*x10 - r11*x9 + r12*x51 + r13*x8 - r14*x50 + r15*x49 + r2*x19 - r3*x17 + r4*x16 - r5*x56 - r6*x45 + r7*x43 - r8*x42 + r9*x63
            t49 = r0*x49 + r1*x53 + r10*x11 - r11*x51 - r12*x9 + r13*x50 + r14*x8 - r15*x48 + r2*x20 - r3*x18 + r4*x56 + r5*x16 - r6*x46 + r7*x44 - r8*x63 - r9*x42
            t50 = r0*x50 + r1*x54 + r10*x51 + r11*x11 - r12*x10 - r13*x49 + r14*x48 + r15*x8 + r2*x21 - r3*x56 - r4*x18 + r5*x17 - r6*x47 + r7*x63 + r8*x44 - r9*x43
            t51 = r0*x51 + r1*x55 - r10*x50 + r11*x49 - r12*x48 + r13*x11 - r14*x10 + r15*x9 + r2*x56 + r3*x21 - r4*x20 + r5*x19 - r6*x63 - r7*x47 + r8*x46 - r9*x45
            t52 = r0*x52 - r1*x48 + r10*x14 - r11*x13 + r12*x55 + r13*x12 - r14*x54 + r15*x53 + r2*x45 - r3*x43 + r4*x42 - r5*x63 + r6*x19 - r7*x17 + r8*x16 - r9*x56
            t53 = r0*x53 - r1*x49 + r10*x15 - r11*x55 - r12*x13 + r13*x54 + r14*x12 - r15*x52 + r2*x46 - r3*x44 + r4*x63 + r5*x42 + r6*x20 - r7*x18 + r8*x56 + r9*x16
            t54 = r0*x54 - r1*x50 + r10*x55 + r11*x15 - r12*x14 - r13*x53 + r14*x52 + r15*x12 + r2*x47 - r3*x63 - r4*x44 + r5*x43 + r6*x21 - r7*x56 - r8*x18 + r9*x17
            t55 = r0*x55 - r1*x51 - r10*x54 + r11*x53 - r12*x52 + r13*x15 - r14*x14 + r15*x13 + r2*x63 + r3*x47 - r4*x46 + r5*x45 + r6*x56 + r7*x21 - r8*x20 + r9*x19
            t56 = r0*x56 - r1*x63 + r10*x21 - r11*x20 + r12*x19 + r13*x18 - r14*x17 + r15*x16 - r2*x51 + r3*x50 - r4*x49 + r5*x48 - r6*x55 + r7*x54 - r8*x53 + r9*x52
            t57 = r0*x57 + r1*x38 + r10*x24 - r11*x23 + r12*x60 + r13*x22 - r14*x59 + r15*x58 - r2*x35 + r3*x33 - r4*x32 + r5*x62 + r6*x29 - r7*x27 + r8*x26 - r9*x61
            t58 = r0*x58 + r1*x39 + r10*x25 - r11*x60 - r12*x23 + r13*x59 + r14*x22 - r15*x57 - r2*x36 + r3*x34 - r4*x62 - r5*x32 + r6*x30 - r7*x28 + r8*x61 + r9*x26
            t59 = r0*x59 + r1*x40 + r10*x60 + r11*x25 - r12*x24 - r13*x58 + r14*x57 + r15*x22 - r2*x37 + r3*x62 + r4*x34 - r5*x33 + r6*x31 - r7*x61 - r8*x28 + r9*x27
            t60 = r0*x60 + r1*x41 - r10*x59 + r11*x58 - r12*x57 + r13*x25 - r14*x24 + r15*x23 - r2*x62 - r3*x37 + r4*x36 - r5*x35 + r6*x61 + r7*x31 - r8*x30 + r9*x29
            t61 = r0*x61 + r1*x62 + r10*x31 - r11*x30 + r12*x29 + r13*x28 - r14*x27 + r15*x26 + r2*x41 - r3*x40 + r4*x39 - r5*x38 - r6*x60 + r7*x59 - r8*x58 + r9*x57
            t62 = r0*x62 - r1*x61 + r10*x37 - r11*x36 + r12*x35 + r13*x34 - r14*x33 + r15*x32 + r2*x60 - r3*x59 + r4*x58 - r5*x57 + r6*x41 - r7*x40 + r8*x39 - r9*x38
            t63 = r0*x63 + r1*x56 + r10*x47 - r11*x46 + r12*x45 + r13*x44 - r14*x43 + r15*x42 - r2*x55 + r3*x54 - r4*x53 + r5*x52 + r6*x51 - r7*x50 + r8*x49 - r9*x48
            out_t[0, row] = s0*t0 + s1*t7 + s10*t16 + s11*t17 + s12*t18 + s13*t19 + s14*t20 + s15*t21 + s2*t8 + s3*t9 + s4*t10 + s5*t11 + s6*t12 + s7*t13 + s8*t14 + s9*t15
            out_t[1, row] = s0*t1 + s1*t2 + s10*t26 + s11*t27 + s12*t28 + s13*t29 + s14*t30 + s15*t31 + s2*t3 + s3*t4 + s4*t5 + s5*t6 + s6*t22 + s7*t23 + s8*t24 + s9*t25
            out_t[2, row] = s0*t2 - s1*t1 + s10*t32 + s11*t33 + s12*t34 + s13*t35 + s14*t36 + s15*t37 - s2*t22 - s3*t23 - s4*t24 - s5*t25 + s6*t3 + s7*t4 + s8*t5 + s9*t6
            out_t[3, row] = s0*t3 + s1*t22 + s10*t4 + s11*t5 + s12*t6 + s13*t38 + s14*t39 + s15*t40 - s2*t1 - s3*t26 - s4*t27 - s5*t28 - s6*t2 - s7*t32 - s8*t33 - s9*t34
            out_t[4, row] = s0*t4 + s1*t23 - s10*t3 - s11*t38 - s12*t39 + s13*t5 + s14*t6 + s15*t41 + s2*t26 - s3*t1 - s4*t29 - s5*t30 + s6*t32 - s7*t2 - s8*t35 - s9*t36
            out_t[5, row] = s0*t5 + s1*t24 + s10*t38 - s11*t3 - s12*t40 - s13*t4 - s14*t41 + s15*t6 + s2*t27 + s3*t29 - s4*t1 - s5*t31 + s6*t33 + s7*t35 - s8*t2 - s9*t37
            out_t[6, row] = s0*t6 + s1*t25 + s10*t39 + s11*t40 - s12*t3 + s13*t41 - s14*t4 - s15*t5 + s2*t28 + s3*t30 + s4*t31 - s5*t1 + s6*t34 + s7*t36 + s8*t37 - s9*t2
            out_t[7, row] = s0*t7 - s1*t0 + s10*t42 + s11*t43 + s12*t44 + s13*t45 + s14*t46 + s15*t47 - s2*t12 - s3*t13 - s4*t14 - s5*t15 + s6*t8 + s7*t9 + s8*t10 + s9*t11
            out_t[8, row] = s0*t8 + s1*t12 + s10*t9 + s11*t10 + s12*t11 + s13*t48 + s14*t49 + s15*t50 - s2*t0 - s3*t16 - s4*t17 - s5*t18 - s6*t7 - s7*t42 - s8*t43 - s9*t44
            out_t[9, row] = s0*t9 + s1*t13 - s10*t8 - s11*t48 - s12*t49 + s13*t10 + s14*t11 + s15*t51 + s2*t16 - s3*t0 - s4*t19 - s5*t20 + s6*t42 - s7*t7 - s8*t45 - s9*t46
            out_t[10, row] = s0*t10 + s1*t14 + s10*t48 - s11*t8 - s12*t50 - s13*t9 - s14*t51 + s15*t11 + s2*t17 + s3*t19 - s4*t0 - s5*t21 + s6*t43 + s7*t45 - s8*t7 - s9*t47
            out_t[11, row] = s0*t11 + s1*t15 + s10*t49 + s11*t50 - s12*t8 + s13*t51 - s14*t9 - s15*t10 + s2*t18 + s3*t20 + s4*t21 - s5*t0 + s6*t44 + s7*t46 + s8*t47 - s9*t7
            out_t[12, row] = s0*t12 - s1*t8 + s10*t13 + s11*t14 + s12*t15 + s13*t52 + s14*t53 + s15*t54 + s2*t7 + s3*t42 + s4*t43 + s5*t44 - s6*t0 - s7*t16 - s8*t17 - s9*t18
            out_t[13, row] = s0*t13 - s1*t9 - s10*t12 - s11*t52 - s12*t53 + s13*t14 + s14*t15 + s15*t55 - s2*t42 + s3*t7 + s4*t45 + s5*t46 + s6*t16 - s7*t0 - s8*t19 - s9*t20
            out_t[14, row] = s0*t14 - s1*t10 + s10*t52 - s11*t12 - s12*t54 - s13*t13 - s14*t55 + s15*t15 - s2*t43 - s3*t45 + s4*t7 + s5*t47 + s6*t17 + s7*t19 - s8*t0 - s9*t21
            out_t[15, row] = s0*t15 - s1*t11 + s10*t53 + s11*t54 - s12*t12 + s13*t55 - s14*t13 - s15*t14 - s2*t44 - s3*t46 - s4*t47 + s5*t7 + s6*t18 + s7*t20 + s8*t21 - s9*t0
            out_t[16, row] = s0*t16 + s1*t42 - s10*t0 - s11*t19 - s12*t20 + s13*t17 + s14*t18 + s15*t56 - s2*t9 + s3*t8 + s4*t48 + s5*t49 - s6*t13 + s7*t12 + s8*t52 + s9*t53
            out_t[17, row] = s0*t17 + s1*t43 + s10*t19 - s11*t0 - s12*t21 - s13*t16 - s14*t56 + s15*t18 - s2*t10 - s3*t48 + s4*t8 + s5*t50 - s6*t14 - s7*t52 + s8*t12 + s9*t54
            out_t[18, row] = s0*t18 + s1*t44 + s10*t20 + s11*t21 - s12*t0 + s13*t56 - s14*t16 - s15*t17 - s2*t11 - s3*t49 - s4*t50 + s5*t8 - s6*t15 - s7*t53 - s8*t54 + s9*t12
            out_t[19, row] = s0*t19 + s1*t45 - s10*t17 + s11*t16 + s12*t56 - s13*t0 - s14*t21 + s15*t20 + s2*t48 - s3*t10 + s4*t9 + s5*t51 + s6*t52 - s7*t14 + s8*t13 + s9*t55
            out_t[20, row] = s0*t20 + s1*t46 - s10*t18 - s11*t56 + s12*t16 + s13*t21 - s14*t0 - s15*t19 + s2*t49 - s3*t11 - s4*t51 + s5*t9 + s6*t53 - s7*t15 - s8*t55 + s9*t13
            out_t[21, row] = s0*t21 + s1*t47 + s10*t56 - s11*t18 + s12*t17 - s13*t20 + s14*t19 - s15*t0 + s2*t50 + s3*t51 - s4*t11 + s5*t10 + s6*t54 + s7*t55 - s8*t15 + s9*t14
            out_t[22, row] = s0*t22 - s1*t3 + s10*t23 + s11*t24 + s12*t25 + s13*t57 + s14*t58 + s15*t59 + s2*t2 + s3*t32 + s4*t33 + s5*t34 - s6*t1 - s7*t26 - s8*t27 - s9*t28
            out_t[23, row] = s0*t23 - s1*t4 - s10*t22 - s11*t57 - s12*t58 + s13*t24 + s14*t25 + s15*t60 - s2*t32 + s3*t2 + s4*t35 + s5*t36 + s6*t26 - s7*t1 - s8*t29 - s9*t30
            out_t[24, row] = s0*t24 - s1*t5 + s10*t57 - s11*t22 - s12*t59 - s13*t23 - s14*t60 + s15*t25 - s2*t33 - s3*t35 + s4*t2 + s5*t37 + s6*t27 + s7*t29 - s8*t1 - s9*t31
            out_t[25, row] = s0*t25 - s1*t6 + s10*t58 + s11*t59 - s12*t22 + s13*t60 - s14*t23 - s15*t24 - s2*t34 - s3*t36 - s4*t37 + s5*t2 + s6*t28 + s7*t30 + s8*t31 - s9*t1
            out_t[26, row] = s0*t26 + s1*t32 - s10*t1 - s11*t29 - s12*t30 + s13*t27 + s14*t28 + s15*t61 - s2*t4 + s3*t3 + s4*t38 + s5*t39 - s6*t23 + s7*t22 + s8*t57 + s9*t58
            out_t[27, row] = s0*t27 + s1*t33 + s10*t29 - s11*t1 - s12*t31 - s13*t26 - s14*t61 + s15*t28 - s2*t5 - s3*t38 + s4*t3 + s5*t40 - s6*t24 - s7*t57 + s8*t22 + s9*t59
            out_t[28, row] = s0*t28 + s1*t34 + s10*t30 + s11*t31 - s12*t1 + s13*t61 - s14*t26 - s15*t27 - s2*t6 - s3*t39 - s4*t40 + s5*t3 - s6*t25 - s7*t58 - s8*t59 + s9*t22
            out_t[29, row] = s0*t29 + s1*t35 - s10*t27 + s11*t26 + s12*t61 - s13*t1 - s14*t31 + s15*t30 + s2*t38 - s3*t5 + s4*t4 + s5*t41 + s6*t57 - s7*t24 + s8*t23 + s9*t60
            out_t[30, row] = s0*t30 + s1*t36 - s10*t28 - s11*t61 + s12*t26 + s13*t31 - s14*t1 - s15*t29 + s2*t39 - s3*t6 - s4*t41 + s5*t4 + s6*t58 - s7*t25 - s8*t60 + s9*t23
            out_t[31, row] = s0*t31 + s1*t37 + s10*t61 - s11*t28 + s12*t27 - s13*t30 + s14*t29 - s15*t1 + s2*t40 + s3*t41 - s4*t6 + s5*t5 + s6*t59 + s7*t60 - s8*t25 + s9*t24
            out_t[32, row] = s0*t32 - s1*t26 - s10*t2 - s11*t35 - s12*t36 + s13*t33 + s14*t34 + s15*t62 + s2*t23 - s3*t22 - s4*t57 - s5*t58 - s6*t4 + s7*t3 + s8*t38 + s9*t39
            out_t[33, row] = s0*t33 - s1*t27 + s10*t35 - s11*t2 - s12*t37 - s13*t32 - s14*t62 + s15*t34 + s2*t24 + s3*t57 - s4*t22 - s5*t59 - s6*t5 - s7*t38 + s8*t3 + s9*t40
            out_t[34, row] = s0*t34 - s1*t28 + s10*t36 + s11*t37 - s12*t2 + s13*t62 - s14*t32 - s15*t33 + s2*t25 + s3*t58 + s4*t59 - s5*t22 - s6*t6 - s7*t39 - s8*t40 + s9*t3
            out_t[35, row] = s0*t35 - s1*t29 - s10*t33 + s11*t32 + s12*t62 - s13*t2 - s14*t37 + s15*t36 - s2*t57 + s3*t24 - s4*t23 - s5*t60 + s6*t38 - s7*t5 + s8*t4 + s9*t41
            out_t[36, row] = s0*t36 - s1*t30 - s10*t34 - s11*t62 + s12*t32 + s13*t37 - s14*t2 - s15*t35 - s2*t58 + s3*t25 + s4*t60 - s5*t23 + s6*t39 - s7*t6 - s8*t41 + s9*t4
            out_t[37, row] = s0*t37 - s1*t31 + s10*t62 - s11*t34 + s12*t33 - s13*t36 + s14*t35 - s15*t2 - s2*t59 - s3*t60 + s4*t25 - s5*t24 + s6*t40 + s7*t41 - s8*t6 + s9*t5
            out_t[38, row] = s0*t38 + s1*t57 - s10*t5 + s11*t4 + s12*t41 - s13*t3 - s14*t40 + s15*t39 - s2*t29 + s3*t27 - s4*t26 - s5*t61 - s6*t35 + s7*t33 - s8*t32 - s9*t62
            out_t[39, row] = s0*t39 + s1*t58 - s10*t6 - s11*t41 + s12*t4 + s13*t40 - s14*t3 - s15*t38 - s2*t30 + s3*t28 + s4*t61 - s5*t26 - s6*t36 + s7*t34 + s8*t62 - s9*t32
            out_t[40, row] = s0*t40 + s1*t59 + s10*t41 - s11*t6 + s12*t5 - s13*t39 + s14*t38 - s15*t3 - s2*t31 - s3*t61 + s4*t28 - s5*t27 - s6*t37 - s7*t62 + s8*t34 - s9*t33
            out_t[41, row] = s0*t41 + s1*t60 - s10*t40 + s11*t39 - s12*t38 - s13*t6 + s14*t5 - s15*t4 + s2*t61 - s3*t31 + s4*t30 - s5*t29 + s6*t62 - s7*t37 + s8*t36 - s9*t35
            out_t[42, row] = s0*t42 - s1*t16 - s10*t7 - s11*t45 - s12*t46 + s13*t43 + s14*t44 + s15*t63 + s2*t13 - s3*t12 - s4*t52 - s5*t53 - s6*t9 + s7*t8 + s8*t48 + s9*t49
            out_t[43, row] = s0*t43 - s1*t17 + s10*t45 - s11*t7 - s12*t47 - s13*t42 - s14*t63 + s15*t44 + s2*t14 + s3*t52 - s4*t12 - s5*t54 - s6*t10 - s7*t48 + s8*t8 + s9*t50
            out_t[44, row] = s0*t44 - s1*t18 + s10*t46 + s11*t47 - s12*t7 + s13*t63 - s14*t42 - s15*t43 + s2*t15 + s3*t53 + s4*t54 - s5*t12 - s6*t11 - s7*t49 - s8*t50 + s9*t8
            out_t[45, row] = s0*t45 - s1*t19 - s10*t43 + s11*t42 + s12*t63 - s13*t7 - s14*t47 + s15*t46 - s2*t52 + s3*t14 - s4*t13 - s5*t55 + s6*t48 - s7*t10 + s8*t9 + s9*t51
            out_t[46, row] = s0*t46 - s1*t20 - s10*t44 - s11*t63 + s12*t42 + s13*t47 - s14*t7 - s15*t45 - s2*t53 + s3*t15 + s4*t55 - s5*t13 + s6*t49 - s7*t11 - s8*t51 + s9*t9
            out_t[47, row] = s0*t47 - s1*t21 + s10*t63 - s11*t44 + s12*t43 - s13*t46 + s14*t45 - s15*t7 - s2*t54 - s3*t55 + s4*t15 - s5*t14 + s6*t50 + s7*t51 - s8*t11 + s9*t10
            out_t[48, row] = s0*t48 + s1*t52 - s10*t10 + s11*t9 + s12*t51 - s13*t8 - s14*t50 + s15*t49 - s2*t19 + s3*t17 - s4*t16 - s5*t56 - s6*t45 + s7*t43 - s8*t42 - s9*t63
            out_t[49, row] = s0*t49 + s1*t53 - s10*t11 - s11*t51 + s12*t9 + s13*t50 - s14*t8 - s15*t48 - s2*t20 + s3*t18 + s4*t56 - s5*t16 - s6*t46 + s7*t44 + s8*t63 - s9*t42
            out_t[50, row] = s0*t50 + s1*t54 + s10*t51 - s11*t11 + s12*t10 - s13*t49 + s14*t48 - s15*t8 - s2*t21 - s3*t56 + s4*t18 - s5*t17 - s6*t47 - s7*t63 + s8*t44 - s9*t43
            out_t[51, row] = s0*t51 + s1*t55 - s10*t50 + s11*t49 - s12*t48 - s13*t11 + s14*t10 - s15*t9 + s2*t56 - s3*t21 + s4*t20 - s5*t19 + s6*t63 - s7*t47 + s8*t46 - s9*t45
            out_t[52, row] = s0*t52 - s1*t48 - s10*t14 + s11*t13 + s12*t55 - s13*t12 - s14*t54 + s15*t53 + s2*t45 - s3*t43 + s4*t42 + s5*t63 - s6*t19 + s7*t17 - s8*t16 - s9*t56
            out_t[53, row] = s0*t53 - s1*t49 - s10*t15 - s11*t55 + s12*t13 + s13*t54 - s14*t12 - s15*t52 + s2*t46 - s3*t44 - s4*t63 + s5*t42 - s6*t20 + s7*t18 + s8*t56 - s9*t16
            out_t[54, row] = s0*t54 - s1*t50 + s10*t55 - s11*t15 + s12*t14 - s13*t53 + s14*t52 - s15*t12 + s2*t47 + s3*t63 - s4*t44 + s5*t43 - s6*t21 - s7*t56 + s8*t18 - s9*t17
            out_t[55, row] = s0*t55 - s1*t51 - s10*t54 + s11*t53 - s12*t52 - s13*t15 + s14*t14 - s15*t13 - s2*t63 + s3*t47 - s4*t46 + s5*t45 + s6*t56 - s7*t21 + s8*t20 - s9*t19
            out_t[56, row] = s0*t56 + s1*t63 - s10*t21 + s11*t20 - s12*t19 - s13*t18 + s14*t17 - s15*t16 - s2*t51 + s3*t50 - s4*t49 + s5*t48 - s6*t55 + s7*t54 - s8*t53 + s9*t52
            out_t[57, row] = s0*t57 - s1*t38 - s10*t24 + s11*t23 + s12*t60 - s13*t22 - s14*t59 + s15*t58 + s2*t35 - s3*t33 + s4*t32 + s5*t62 - s6*t29 + s7*t27 - s8*t26 - s9*t61
            out_t[58, row] = s0*t58 - s1*t39 - s10*t25 - s11*t60 + s12*t23 + s13*t59 - s14*t22 - s15*t57 + s2*t36 - s3*t34 - s4*t62 + s5*t32 - s6*t30 + s7*t28 + s8*t61 - s9*t26
            out_t[59, row] = s0*t59 - s1*t40 + s10*t60 - s11*t25 + s12*t24 - s13*t58 + s14*t57 - s15*t22 + s2*t37 + s3*t62 - s4*t34 + s5*t33 - s6*t31 - s7*t61 + s8*t28 - s9*t27
            out_t[60, row] = s0*t60 - s1*t41 - s10*t59 + s11*t58 - s12*t57 - s13*t25 + s14*t24 - s15*t23 - s2*t62 + s3*t37 - s4*t36 + s5*t35 + s6*t61 - s7*t31 + s8*t30 - s9*t29
            out_t[61, row] = s0*t61 + s1*t62 - s10*t31 + s11*t30 - s12*t29 - s13*t28 + s14*t27 - s15*t26 - s2*t41 + s3*t40 - s4*t39 + s5*t38 - s6*t60 + s7*t59 - s8*t58 + s9*t57
            out_t[62, row] = s0*t62 - s1*t61 - s10*t37 + s11*t36 - s12*t35 - s13*t34 + s14*t33 - s15*t32 + s2*t60 - s3*t59 + s4*t58 - s5*t57 - s6*t41 + s7*t40 - s8*t39 + s9*t38
            out_t[63, row] = s0*t63 - s1*t56 - s10*t47 + s11*t46 - s12*t45 - s13*t44 + s14*t43 - s15*t42 + s2*t55 - s3*t54 + s4*t53 - s5*t52 - s6*t51 + s7*t50 - s8*t49 + s9*t48
            # --- end of body ---
        for row in range(count):
            for col in range(64):
                out[start + row, col] = out_t[col, row]
    return probe == 0
