"""`galinear tour`: a short tour of the algebra core, every result checked against a reference.

Every check compares two independent computations, which round differently, so each tolerance is
stated in units in the last place (ULPs): ``ulps * eps * scale``, with eps the float64 machine
epsilon and ``scale`` the size the rounding errors are proportional to (for a sum of products,
the number of terms times the largest product; for a unit rotor, 1). The budgets are about ten
times the largest error measured over n = 2..8 and seeds 0..19 (``tests/commands/test_cli_tour.py`` runs
the tour on every n); a check whose reference is not exact to rounding (clifford's Taylor series,
a power iteration stopped at a residual) says so and gets the budget of its own accuracy.
"""

HELP = ("a short tour of galinear.Algebra and MultiVector: products, exp, decomposition, log, sandwich maps, a boost "
        "and a motor, a torch motor and the planes of a rotor layer, checked against clifford, scipy and known values")


def add_arguments(parser) -> None:
    parser.add_argument("--n", type=int, default=4, help="dimension of Euclidean Cl(n), 2..8 (default 4)")
    parser.add_argument("--seed", type=int, default=0, help="random seed (default 0)")


def run(args) -> int:
    import numpy as np

    from galinear import Algebra
    from galinear.core import rotors
    from galinear.core.signatures import left_matrix

    from galinear.commands._report import fail

    if not 2 <= args.n <= 8:
        return fail("tour", f"--n must be between 2 and 8, got {args.n}")
    if args.seed < 0:
        return fail("tour", f"--seed must be a non-negative integer, got {args.seed}")
    rng = np.random.default_rng(args.seed)
    alg = Algebra(args.n)
    n = alg.n
    failures = []

    eps = float(np.finfo(np.float64).eps)

    def report(label, error, ulps, reference, scale=1.0):
        """``error`` must be at most ``ulps`` units in the last place of ``scale``."""
        tol = ulps * eps * float(scale)
        ok = bool(error <= tol)
        if not ok:
            failures.append(label)
        print(f"  {label:<44s} max error {error:9.2e}  (tol {ulps:g} ulp = {tol:.1e}, vs {reference}) "
              f"{'ok' if ok else 'FAIL'}")

    def fmt(v):
        return "[" + ", ".join(f"{x:.3f}" for x in np.atleast_1d(v)) + "]"

    print(f"{alg!r}: {alg.dim} coefficients in shortlex order {', '.join(alg.blade_names[: min(alg.dim, 8)])}{', ...' if alg.dim > 8 else ''}")
    try:
        import clifford  # noqa: F401

        have_clifford = True
    except ImportError:
        have_clifford = False
        print("  (clifford not installed: `pip install clifford` to compare against it)")
    try:
        from scipy.linalg import expm
    except ImportError:
        expm = None
        print("  (scipy not installed: `pip install scipy` to compare against expm)")

    a, b = rng.standard_normal((2, 4, alg.dim))
    if have_clifford:
        from galinear.testing import clifford_reference

        for name in ("gp", "op", "lc"):
            ref = clifford_reference(alg, name, a, b)
            err = np.max(np.abs(getattr(alg, name)(a, b) - ref))
            # each coefficient sums up to dim products: rounding ~ dim * eps * max |a_i b_j|
            report(f"{name} of 4 random pairs", err, 8, "clifford", alg.dim * np.max(np.abs(a)) * np.max(np.abs(b)))

    coeffs = rng.standard_normal(alg.num_bivectors)
    coeffs /= np.linalg.norm(coeffs)
    B = alg.bivector(coeffs)
    R = alg.exp(B)
    print(f"random bivector B, |B| = 1, {alg.num_bivectors} coefficients; R = exp(B)")
    RR = alg.gp(R, alg.reverse(R))
    report("R ~R = 1", np.max(np.abs(RR - alg.scalar(1.0))), 8 * alg.dim, "exact")
    if expm is not None:
        ref = expm(left_matrix(alg, B[None])[0])[:, 0]
        report("exp(B)", np.max(np.abs(R - ref)), 8 * alg.dim, "scipy expm(L_B) 1")
        A = rotors.skew_matrix(n, coeffs)
        report("vector action of R (rotation matrix)", np.max(np.abs(alg.rotation_matrix(R) - expm(2 * A))), 32 * n,
               "scipy expm(2A)")

    exact = alg.decompose(B)
    power = alg.decompose(B, method="power", tol=1e-12, max_iter=10_000)
    print(f"invariant decomposition into k = {n // 2} simple parts; plane angles {fmt(exact.angles)}")
    print(f"  power iteration: angles {fmt(power.angles)}, steps per plane {power.iterations.tolist()}")
    report("sum of parts - B (exact method)", np.max(np.abs(exact.bivectors.sum(axis=0) - coeffs)), 16 * n, "B")
    # the power iteration stops at a residual of 1e-12, so its angles are good to about 1e-12, not to rounding
    report("sorted angles, power vs exact", np.max(np.abs(np.sort(power.angles) - np.sort(exact.angles))),
           1e-12 / eps * 10, "exact")
    report("log(R) - B", np.max(np.abs(alg.log(R) - B)), 64 * n, "B")

    S = alg.exp(alg.bivector(rng.standard_normal(alg.num_bivectors)))
    M = alg.sandwich_matrix(R, S)
    report(f"{alg.dim}x{alg.dim} matrix of x -> R x ~S: M M^T - I", np.max(np.abs(M @ M.T - np.eye(alg.dim))),
           8 * alg.dim, "identity")
    x = rng.standard_normal(alg.dim)
    report("M x - R x ~S", np.max(np.abs(M @ x - alg.gp(alg.gp(R, x), alg.reverse(S)))), 8 * alg.dim, "two products",
           np.max(np.abs(x)))

    from galinear import MultiVector

    print("MultiVector: the same maths with operators (* ^ | << >> & ~ @ / **), batched like numpy")
    X, Y = MultiVector(alg, a), MultiVector(alg, b)
    # graded kernels and the dense kernels add the same terms in different orders
    report("X * Y, X ^ Y vs alg.gp, alg.op", max(np.max(np.abs((X * Y).values - alg.gp(a, b))),
                                                 np.max(np.abs((X ^ Y).values - alg.op(a, b)))), 8, "array API",
           alg.dim * np.max(np.abs(a)) * np.max(np.abs(b)))
    # a random dense multivector of Cl(8) can be singular to working precision: invert Z = 1 + X / 2^(n/2)
    # (|X| / 2^(n/2) about 1), and scale by the condition of its multiplication matrix, which the
    # inverse's error grows with
    z = alg.scalar(1.0) + a / np.sqrt(alg.dim)
    Z = MultiVector(alg, z)
    inverse_scale = np.linalg.cond(left_matrix(alg, z)).max()
    report("Z.inv() * Z - 1, Z = 1 + X / 2^(n/2)", np.max(np.abs((Z.inv() * Z).values - alg.scalar(1.0))), 8 * alg.dim, "1",
           inverse_scale)
    Rm = MultiVector(alg, R)
    report("R @ X - R X ~R", np.max(np.abs((Rm @ X).values - (Rm * X * ~Rm).values)), 8 * alg.dim, "products",
           np.max(np.abs(a)))
    for name, signature, coefficients in (
        ("boost and rotation in Cl(3,1)", (3, 1, 0), {"e14": 1.5, "e23": 0.7}),
        ("screw motor in PGA Cl(3,0,1)", (3, 0, 1), {"e34": 0.8, "e12": 0.5}),
    ):
        other = Algebra(*signature)
        Bo = np.zeros(other.dim)
        for blade, value in coefficients.items():
            Bo[other.blade_names.index(blade)] = value
        Ro = other.exp(Bo)
        print(f"{name}: exp({MultiVector(other, Bo)}) = {MultiVector(other, Ro)}")
        if expm is not None:
            ref = expm(left_matrix(other, Bo[None])[0])[:, 0]
            report(f"exp in {other!r}", np.max(np.abs(Ro - ref)), 8 * other.dim, "scipy expm(L_B) 1",
                   max(1.0, np.max(np.abs(ref))))
        report(f"exp(log R) - R in {other!r}", np.max(np.abs(other.exp(other.log(Ro)) - Ro)), 8 * other.dim, "R",
               max(1.0, np.max(np.abs(Ro))))
    _torch_steps(rng, report, expm)
    if failures:
        print(f"{len(failures)} check(s) failed: {', '.join(failures)}")
        return 1
    print("all checks passed")
    return 0


def _torch_steps(rng, report, expm) -> None:
    """A differentiable PGA motor (galinear.nn.motors) and the planes of a RotorLinear."""
    import numpy as np

    try:
        import torch
    except ImportError:
        from galinear._extras import install_command

        print("  (torch not installed: the torch motor and the rotor-layer inspection are skipped; "
              f"{install_command('torch')} to run them)")
        return
    from galinear import Algebra
    from galinear.core.rotors import wedge
    from galinear.core.signatures import left_matrix
    from galinear.nn import RotorLinear, motors
    from galinear.nn.inspect import planes

    pga = Algebra(*motors.SIGNATURE)
    b = np.array([0.3, -0.5, 0.2, 0.4, 0.1, -0.6])  # e12 e13 e14 (translation), e23 e24 e34 (rotation)
    M = motors.motor_exp(torch.tensor(b, dtype=torch.float64))
    print(f"torch motor (galinear.nn.motors): exp of {b.tolist()} in Cl(3,0,1), differentiable")
    if expm is not None:
        ref = expm(left_matrix(pga, pga.bivector(b)[None])[0])[:, 0]
        report("motor_exp vs expm", float(np.max(np.abs(M.numpy() - ref))), 64, "scipy expm(L_B) 1")
    xyz = torch.tensor(rng.standard_normal((5, 3)))
    moved = motors.point_coordinates(motors.sandwich(M, motors.point(xyz)))
    distances = torch.cdist(xyz, xyz)
    report("distances kept by the motor's sandwich", float((torch.cdist(moved, moved) - distances).abs().max()),
           256, "the points' distances", float(distances.max()))

    layer = RotorLinear(32, 16, chunk_size=16).double()  # Cl(4): two chunk pairs, two planes per rotor
    set_angles = np.array([[0.7, 0.2], [0.45, 0.05]])
    frames = [np.linalg.qr(rng.standard_normal((4, 4)))[0] for _ in range(2)]  # orthonormal u1 w1 u2 w2
    parts = np.stack([[set_angles[p, j] * wedge(4, frames[p][:, 2 * j], frames[p][:, 2 * j + 1]) for j in range(2)]
                      for p in range(2)])
    with torch.no_grad():
        layer.left_bivectors.copy_(torch.tensor(parts.sum(axis=1)))
    listing = planes(layer)
    print("planes of a RotorLinear (galinear.nn.inspect.planes), left rotors set to known planes and angles:")
    print("\n".join("  " + line for line in listing.table(limit=4).splitlines()))
    report("listed angles - the angles set", float(np.max(np.abs(listing.left_angles - set_angles))), 64,
           "angles set")
    report("listed planes' parts - theta u ^ w set", float(np.max(np.abs(listing.left_bivectors - parts))), 64,
           "planes set")
