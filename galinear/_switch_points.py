"""The measured switch points of the rotor layers: one constant each, with the benchmark that measured it.

:func:`galinear.nn.functional.plan.plan`, the one dispatcher of :class:`~galinear.nn.RotorLinear`
and :class:`~galinear.nn.RotorNetwork`, applies them; its docstring states the rules. They live
here, below every layer, because the numba kernels (:mod:`galinear.rotor_kernels`) and the lazily
registered numba backend read one of them too, and neither can import the torch dispatcher
without an import cycle through the backend registry. They are stated in the rotor
specification's documentation and in docs/performance.md ("Which backend a rotor layer runs")
too. Plain Python values and no imports, so that numba, numpy and torch code read the same.

A change of machine can move them: rerun the benchmark named at each and update the constant
and both statements of it.
"""

#: Training: chunks of at most 2**MATRIX_MAX_N coefficients go through the chunk matrices
#: ("dense": every chunk-pair matrix in one batched call, then one GEMM); larger chunks through a
#: rotor backend. ``python benchmarks/bench_backends.py`` (whole RotorLinear calls, n = 3..11,
#: 1 / 32 / 512 tokens): the matrices are 1.2-12x faster at 512 tokens for n <= 7 and win or tie at
#: 32 tokens for n <= 5; at 1-32 tokens with n = 7 a rotor backend is faster (2.9-3.5 ms against
#: 4.7-5.1 ms), which this one threshold gives up for the large batches of training.
MATRIX_MAX_N = 7

#: Training: a RotorNetwork stage (its gadgets on one input, ``network_stage=True``) with chunks of
#: at most 2**NETWORK_BLOCKS_MAX_N coefficients runs the parity blocks of all its chunk pairs in
#: one batched product (the "dense" backend of the stage). Measured side by side, one network
#: step (forward + backward) on 2,048 tokens, 1 thread, float32, loaded 2-core machine: the blocks
#: against "spinor" 200 against 320 ms (256 -> 256, n = 8), 550 against 980 ms (512 -> 512,
#: n = 9), 1,960 against 1,960 ms (1024 -> 256, n = 10); ``python benchmarks/bench_lm_step.py
#: --models dense rotor-network --backends dense spinor``.
NETWORK_BLOCKS_MAX_N = 10

#: Inference: chunks of at most 2**INFERENCE_MATRIX_MAX_N coefficients use the layer's cached
#: (out, in) matrix at any batch. Same benchmark: at n <= 9 the matrix is the fastest with
#: 2 threads at every batch; at n = 11 "spinor" is 3x faster at 512 tokens.
INFERENCE_MATRIX_MAX_N = 9

#: Inference on up to this many tokens never runs a rotor backend: a RotorLinear decodes or uses
#: its cached matrix (below), a RotorNetwork runs the whole network in one call (the decoding
#: kernel, or its stacked matrices). ``python benchmarks/bench_backends.py --decode --threads 1``.
MATRIX_MAX_INFERENCE_BATCH = 32

#: Inference on the CPU, at most MATRIX_MAX_INFERENCE_BATCH tokens: the compiled decoding kernel
#: (:meth:`galinear.nn.RotorLinear.decode`) instead of the cached matrix for one token with chunks
#: of n >= DECODE_MIN_N, and for every such batch when the (out, in) matrix has at least
#: DECODE_MIN_ENTRIES entries. Same command (matrix time / kernel time: 0.98 at 576 x 576 with
#: chunks of 2**9, 5.4 at 2048 x 2048; 2.2-5.6 at 32 tokens and 2048 x 2048).
DECODE_MIN_N = 9
DECODE_MIN_ENTRIES = 2048 * 2048

#: The exact gradient's bivector parts: one batched matrix product per chunk pair up to this many
#: coefficients per chunk (T d^2 multiply-adds at GEMM speed); above it one gather-multiply-sum per
#: bivector blade (T d C(n, 2), memory-bound) or, on the CPU, the numba kernel of
#: :mod:`galinear.rotor_kernels.bivector_parts`. Timed through the training rows of
#: ``python benchmarks/bench_gradient.py`` and ``python benchmarks/bench_mlp_step.py`` (chunks of
#: 2**7 below the limit, 2**11 above); no benchmark sweeps it.
CORRELATION_LIMIT = 256

#: The numba backend: the token-resident kernel (:mod:`galinear.rotor_kernels.resident`) up to this many
#: tokens per chunk pair, the tile kernel (:mod:`galinear.rotor_kernels.rotor_chain`) above.
#: ``python benchmarks/bench_resident.py`` (tile time / resident time at d = 2048: 2.2 at 1 token,
#: 1.4 at 4, 0.86 at 8).
RESIDENT_MAX_TOKENS = 4

#: Backends made of many small parallel torch operations run single-threaded on the CPU. Each
#: parallel operation ends at a barrier of the thread pool, and with one other busy process a
#: barrier costs a scheduler quantum: RotorLinear(2048, 2048) in eval mode on 2048 tokens with
#: "spinor" took 66 ms with 1 thread and 1,472 ms with 2 threads beside one busy process, while
#: "numba" (one parallel region per call) and "dense" (one GEMM) keep their speed. "spinor" shares
#: its token blocks among the caller's threads instead, each block serial (no barriers): 20.2 ms at 2
#: threads against 33.1 ms at 1 on an idle machine, 34.2 against 34.3 ms beside a busy process.
#: ``python benchmarks/bench_contention.py`` (``make bench-spinor``).
SERIAL_BACKENDS = ("spinor", "factored")
