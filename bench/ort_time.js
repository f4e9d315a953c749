// ONNX Runtime's CPU timing of one model, for bench/cpu_models_vs_peers.py: median ms per run of
// ITERS runs after WARMUP, random input of the model's first input shape (batch from the file).
//   node bench/ort_time.js MODEL.onnx THREADS WARMUP ITERS   (NODE_PATH: onnxruntime-node's folder)
const ort = require('onnxruntime-node');

(async () => {
  const [model, threads, warmup, iters] = process.argv.slice(2);
  const session = await ort.InferenceSession.create(model, {
    intraOpNumThreads: Number(threads), interOpNumThreads: 1, graphOptimizationLevel: 'all'});
  const name = session.inputNames[0];
  const shape = [1, 3, 224, 224];
  const data = Float32Array.from({length: shape.reduce((a, b) => a * b)}, () => Math.random() * 2 - 1);
  const feeds = {[name]: new ort.Tensor('float32', data, shape)};
  for (let i = 0; i < Number(warmup); ++i) await session.run(feeds);
  const ms = [];
  for (let i = 0; i < Number(iters); ++i) {
    const start = process.hrtime.bigint();
    await session.run(feeds);
    ms.push(Number(process.hrtime.bigint() - start) / 1e6);
  }
  ms.sort((a, b) => a - b);
  console.log(JSON.stringify({median_ms: ms[Math.floor(ms.length / 2)], iters: ms.length}));
})().catch((e) => { console.error(e); process.exit(1); });
