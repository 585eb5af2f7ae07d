"""Generated kernel: double simple-rotor sandwich out = R x ~S in Cl(5,0,0), metric (1, 1, 1, 1, 1), shortlex blade order.

spec:       KernelSpec(op='sandwich2', metric=(1, 1, 1, 1, 1))
target:     numba
generator:  galinear.symbolic.codegen (from galinear.symbolic.spec)
regenerate: galinear codegen --op sandwich2 --n 5 --target numba --out galinear/_generated/numba_kernels
            (or `galinear codegen --all` / `make codegen` for every shipped kernel)

Do not edit by hand.
"""

import numpy as np

from galinear._numba import jit


@jit
def kernel(r, s, x, out):
    """double simple-rotor sandwich out = R x ~S in Cl(5,0,0), metric (1, 1, 1, 1, 1), shortlex blade order; see galinear._generated for the signature."""
    if r.shape[1] != 11 or s.shape[1] != 11 or x.shape[1] != 32 or out.shape[1] != 32:
        raise ValueError("wrong row widths: expected r: 11, s: 11, x: 32, out: 32")
    if r.shape[0] != out.shape[0] or s.shape[0] != out.shape[0] or x.shape[0] != out.shape[0]:
        raise ValueError("all arguments need the same batch size (axis 0)")
    nrows = out.shape[0]
    r_t = np.empty((11, 64), dtype=r.dtype)
    s_t = np.empty((11, 64), dtype=s.dtype)
    x_t = np.empty((32, 64), dtype=x.dtype)
    out_t = np.empty((32, 64), dtype=out.dtype)
    probe = out.dtype.type(0.0)  # stays 0 unless an input entry is inf or nan
    for start in range(0, nrows, 64):
        count = min(64, nrows - start)
        for row in range(count):
            for col in range(11):
                value = r[start + row, col]
                r_t[col, row] = value
                probe += value - value
            for col in range(11):
                value = s[start + row, col]
                s_t[col, row] = value
                probe += value - value
            for col in range(32):
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
            t0 = r0*x0 - r1*x6 - r10*x15 - r2*x7 - r3*x8 - r4*x9 - r5*x10 - r6*x11 - r7*x12 - r8*x13 - r9*x14
            t1 = r0*x1 + r1*x2 - r10*x21 + r2*x3 + r3*x4 + r4*x5 - r5*x16 - r6*x17 - r7*x18 - r8*x19 - r9*x20
            t2 = r0*x2 - r1*x1 - r10*x24 + r2*x16 + r3*x17 + r4*x18 + r5*x3 + r6*x4 + r7*x5 - r8*x22 - r9*x23
            t3 = r0*x3 - r1*x16 - r10*x25 - r2*x1 + r3*x19 + r4*x20 - r5*x2 + r6*x22 + r7*x23 + r8*x4 + r9*x5
            t4 = r0*x4 - r1*x17 + r10*x5 - r2*x19 - r3*x1 + r4*x21 - r5*x22 - r6*x2 + r7*x24 - r8*x3 + r9*x25
            t5 = r0*x5 - r1*x18 - r10*x4 - r2*x20 - r3*x21 - r4*x1 - r5*x23 - r6*x24 - r7*x2 - r8*x25 - r9*x3
            t6 = r0*x6 + r1*x0 - r10*x28 - r2*x10 - r3*x11 - r4*x12 + r5*x7 + r6*x8 + r7*x9 - r8*x26 - r9*x27
            t7 = r0*x7 + r1*x10 - r10*x29 + r2*x0 - r3*x13 - r4*x14 - r5*x6 + r6*x26 + r7*x27 + r8*x8 + r9*x9
            t8 = r0*x8 + r1*x11 + r10*x9 + r2*x13 + r3*x0 - r4*x15 - r5*x26 - r6*x6 + r7*x28 - r8*x7 + r9*x29
            t9 = r0*x9 + r1*x12 - r10*x8 + r2*x14 + r3*x15 + r4*x0 - r5*x27 - r6*x28 - r7*x6 - r8*x29 - r9*x7
            t10 = r0*x10 - r1*x7 - r10*x30 + r2*x6 - r3*x26 - r4*x27 + r5*x0 - r6*x13 - r7*x14 + r8*x11 + r9*x12
            t11 = r0*x11 - r1*x8 + r10*x12 + r2*x26 + r3*x6 - r4*x28 + r5*x13 + r6*x0 - r7*x15 - r8*x10 + r9*x30
            t12 = r0*x12 - r1*x9 - r10*x11 + r2*x27 + r3*x28 + r4*x6 + r5*x14 + r6*x15 + r7*x0 - r8*x30 - r9*x10
            t13 = r0*x13 - r1*x26 + r10*x14 - r2*x8 + r3*x7 - r4*x29 - r5*x11 + r6*x10 - r7*x30 + r8*x0 - r9*x15
            t14 = r0*x14 - r1*x27 - r10*x13 - r2*x9 + r3*x29 + r4*x7 - r5*x12 + r6*x30 + r7*x10 + r8*x15 + r9*x0
            t15 = r0*x15 - r1*x28 + r10*x0 - r2*x29 - r3*x9 + r4*x8 - r5*x30 - r6*x12 + r7*x11 - r8*x14 + r9*x13
            t16 = r0*x16 + r1*x3 - r10*x31 - r2*x2 + r3*x22 + r4*x23 + r5*x1 - r6*x19 - r7*x20 + r8*x17 + r9*x18
            t17 = r0*x17 + r1*x4 + r10*x18 - r2*x22 - r3*x2 + r4*x24 + r5*x19 + r6*x1 - r7*x21 - r8*x16 + r9*x31
            t18 = r0*x18 + r1*x5 - r10*x17 - r2*x23 - r3*x24 - r4*x2 + r5*x20 + r6*x21 + r7*x1 - r8*x31 - r9*x16
            t19 = r0*x19 + r1*x22 + r10*x20 + r2*x4 - r3*x3 + r4*x25 - r5*x17 + r6*x16 - r7*x31 + r8*x1 - r9*x21
            t20 = r0*x20 + r1*x23 - r10*x19 + r2*x5 - r3*x25 - r4*x3 - r5*x18 + r6*x31 + r7*x16 + r8*x21 + r9*x1
            t21 = r0*x21 + r1*x24 + r10*x1 + r2*x25 + r3*x5 - r4*x4 - r5*x31 - r6*x18 + r7*x17 - r8*x20 + r9*x19
            t22 = r0*x22 - r1*x19 + r10*x23 + r2*x17 - r3*x16 + r4*x31 + r5*x4 - r6*x3 + r7*x25 + r8*x2 - r9*x24
            t23 = r0*x23 - r1*x20 - r10*x22 + r2*x18 - r3*x31 - r4*x16 + r5*x5 - r6*x25 - r7*x3 + r8*x24 + r9*x2
            t24 = r0*x24 - r1*x21 + r10*x2 + r2*x31 + r3*x18 - r4*x17 + r5*x25 + r6*x5 - r7*x4 - r8*x23 + r9*x22
            t25 = r0*x25 - r1*x31 + r10*x3 - r2*x21 + r3*x20 - r4*x19 - r5*x24 + r6*x23 - r7*x22 + r8*x5 - r9*x4
            t26 = r0*x26 + r1*x13 + r10*x27 - r2*x11 + r3*x10 - r4*x30 + r5*x8 - r6*x7 + r7*x29 + r8*x6 - r9*x28
            t27 = r0*x27 + r1*x14 - r10*x26 - r2*x12 + r3*x30 + r4*x10 + r5*x9 - r6*x29 - r7*x7 + r8*x28 + r9*x6
            t28 = r0*x28 + r1*x15 + r10*x6 - r2*x30 - r3*x12 + r4*x11 + r5*x29 + r6*x9 - r7*x8 - r8*x27 + r9*x26
            t29 = r0*x29 + r1*x30 + r10*x7 + r2*x15 - r3*x14 + r4*x13 - r5*x28 + r6*x27 - r7*x26 + r8*x9 - r9*x8
            t30 = r0*x30 - r1*x29 + r10*x10 + r2*x28 - r3*x27 + r4*x26 + r5*x15 - r6*x14 + r7*x13 + r8*x12 - r9*x11
            t31 = r0*x31 + r1*x25 + r10*x16 - r2*x24 + r3*x23 - r4*x22 + r5*x21 - r6*x20 + r7*x19 + r8*x18 - r9*x17
            out_t[0, row] = s0*t0 + s1*t6 + s10*t15 + s2*t7 + s3*t8 + s4*t9 + s5*t10 + s6*t11 + s7*t12 + s8*t13 + s9*t14
            out_t[1, row] = s0*t1 + s1*t2 + s10*t21 + s2*t3 + s3*t4 + s4*t5 + s5*t16 + s6*t17 + s7*t18 + s8*t19 + s9*t20
            out_t[2, row] = s0*t2 - s1*t1 + s10*t24 - s2*t16 - s3*t17 - s4*t18 + s5*t3 + s6*t4 + s7*t5 + s8*t22 + s9*t23
            out_t[3, row] = s0*t3 + s1*t16 + s10*t25 - s2*t1 - s3*t19 - s4*t20 - s5*t2 - s6*t22 - s7*t23 + s8*t4 + s9*t5
            out_t[4, row] = s0*t4 + s1*t17 + s10*t5 + s2*t19 - s3*t1 - s4*t21 + s5*t22 - s6*t2 - s7*t24 - s8*t3 - s9*t25
            out_t[5, row] = s0*t5 + s1*t18 - s10*t4 + s2*t20 + s3*t21 - s4*t1 + s5*t23 + s6*t24 - s7*t2 + s8*t25 - s9*t3
            out_t[6, row] = s0*t6 - s1*t0 + s10*t28 - s2*t10 - s3*t11 - s4*t12 + s5*t7 + s6*t8 + s7*t9 + s8*t26 + s9*t27
            out_t[7, row] = s0*t7 + s1*t10 + s10*t29 - s2*t0 - s3*t13 - s4*t14 - s5*t6 - s6*t26 - s7*t27 + s8*t8 + s9*t9
            out_t[8, row] = s0*t8 + s1*t11 + s10*t9 + s2*t13 - s3*t0 - s4*t15 + s5*t26 - s6*t6 - s7*t28 - s8*t7 - s9*t29
            out_t[9, row] = s0*t9 + s1*t12 - s10*t8 + s2*t14 + s3*t15 - s4*t0 + s5*t27 + s6*t28 - s7*t6 + s8*t29 - s9*t7
            out_t[10, row] = s0*t10 - s1*t7 + s10*t30 + s2*t6 + s3*t26 + s4*t27 - s5*t0 - s6*t13 - s7*t14 + s8*t11 + s9*t12
            out_t[11, row] = s0*t11 - s1*t8 + s10*t12 - s2*t26 + s3*t6 + s4*t28 + s5*t13 - s6*t0 - s7*t15 - s8*t10 - s9*t30
            out_t[12, row] = s0*t12 - s1*t9 - s10*t11 - s2*t27 - s3*t28 + s4*t6 + s5*t14 + s6*t15 - s7*t0 + s8*t30 - s9*t10
            out_t[13, row] = s0*t13 + s1*t26 + s10*t14 - s2*t8 + s3*t7 + s4*t29 - s5*t11 + s6*t10 + s7*t30 - s8*t0 - s9*t15
            out_t[14, row] = s0*t14 + s1*t27 - s10*t13 - s2*t9 - s3*t29 + s4*t7 - s5*t12 - s6*t30 + s7*t10 + s8*t15 - s9*t0
            out_t[15, row] = s0*t15 + s1*t28 - s10*t0 + s2*t29 - s3*t9 + s4*t8 + s5*t30 - s6*t12 + s7*t11 - s8*t14 + s9*t13
            out_t[16, row] = s0*t16 - s1*t3 + s10*t31 + s2*t2 + s3*t22 + s4*t23 - s5*t1 - s6*t19 - s7*t20 + s8*t17 + s9*t18
            out_t[17, row] = s0*t17 - s1*t4 + s10*t18 - s2*t22 + s3*t2 + s4*t24 + s5*t19 - s6*t1 - s7*t21 - s8*t16 - s9*t31
            out_t[18, row] = s0*t18 - s1*t5 - s10*t17 - s2*t23 - s3*t24 + s4*t2 + s5*t20 + s6*t21 - s7*t1 + s8*t31 - s9*t16
            out_t[19, row] = s0*t19 + s1*t22 + s10*t20 - s2*t4 + s3*t3 + s4*t25 - s5*t17 + s6*t16 + s7*t31 - s8*t1 - s9*t21
            out_t[20, row] = s0*t20 + s1*t23 - s10*t19 - s2*t5 - s3*t25 + s4*t3 - s5*t18 - s6*t31 + s7*t16 + s8*t21 - s9*t1
            out_t[21, row] = s0*t21 + s1*t24 - s10*t1 + s2*t25 - s3*t5 + s4*t4 + s5*t31 - s6*t18 + s7*t17 - s8*t20 + s9*t19
            out_t[22, row] = s0*t22 - s1*t19 + s10*t23 + s2*t17 - s3*t16 - s4*t31 - s5*t4 + s6*t3 + s7*t25 - s8*t2 - s9*t24
            out_t[23, row] = s0*t23 - s1*t20 - s10*t22 + s2*t18 + s3*t31 - s4*t16 - s5*t5 - s6*t25 + s7*t3 + s8*t24 - s9*t2
            out_t[24, row] = s0*t24 - s1*t21 - s10*t2 - s2*t31 + s3*t18 - s4*t17 + s5*t25 - s6*t5 + s7*t4 - s8*t23 + s9*t22
            out_t[25, row] = s0*t25 + s1*t31 - s10*t3 - s2*t21 + s3*t20 - s4*t19 - s5*t24 + s6*t23 - s7*t22 - s8*t5 + s9*t4
            out_t[26, row] = s0*t26 - s1*t13 + s10*t27 + s2*t11 - s3*t10 - s4*t30 - s5*t8 + s6*t7 + s7*t29 - s8*t6 - s9*t28
            out_t[27, row] = s0*t27 - s1*t14 - s10*t26 + s2*t12 + s3*t30 - s4*t10 - s5*t9 - s6*t29 + s7*t7 + s8*t28 - s9*t6
            out_t[28, row] = s0*t28 - s1*t15 - s10*t6 - s2*t30 + s3*t12 - s4*t11 + s5*t29 - s6*t9 + s7*t8 - s8*t27 + s9*t26
            out_t[29, row] = s0*t29 + s1*t30 - s10*t7 - s2*t15 + s3*t14 - s4*t13 - s5*t28 + s6*t27 - s7*t26 - s8*t9 + s9*t8
            out_t[30, row] = s0*t30 - s1*t29 - s10*t10 + s2*t28 - s3*t27 + s4*t26 - s5*t15 + s6*t14 - s7*t13 - s8*t12 + s9*t11
            out_t[31, row] = s0*t31 - s1*t25 - s10*t16 + s2*t24 - s3*t23 + s4*t22 - s5*t21 + s6*t20 - s7*t19 - s8*t18 + s9*t17
            # --- end of body ---
        for row in range(count):
            for col in range(32):
                out[start + row, col] = out_t[col, row]
    return probe == 0
