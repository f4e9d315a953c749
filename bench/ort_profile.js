// ONNX Runtime's own per-node kernel times for one model, to set beside `galley run --verbose`:
// which layers a Galley run loses on. Runs ITERS times with ORT's profiler on, then prints each
// node (in execution order) with the median of its kernel times over the runs after WARMUP, and
// their sum. ORT fuses and renames nodes (Conv + Clip -> "..._nchwc"), so match rows by position
// and shape, not by name.
//   node bench/ort_profile.js MODEL.onnx THREADS WARMUP ITERS   (NODE_PATH: onnxruntime-node's folder)
const fs = require('fs');
const os = require('os');
const path = require('path');
const ort = require('onnxruntime-node');

(async () => {
  const [model, threads, warmup, iters] = process.argv.slice(2);
  const prefix = path.join(fs.mkdtempSync(path.join(os.tmpdir(), 'ort-profile-')), 'p');
  const session = await ort.InferenceSession.create(model, {
    intraOpNumThreads: Number(threads), interOpNumThreads: 1, graphOptimizationLevel: 'all',
    enableProfiling: true, profileFilePrefix: prefix});
  const name = session.inputNames[0];
  const shape = [1, 3, 224, 224];
  const data = Float32Array.from({length: shape.reduce((a, b) => a * b)}, () => Math.random() * 2 - 1);
  const feeds = {[name]: new ort.Tensor('float32', data, shape)};
  const runs = Number(warmup) + Number(iters);
  for (let i = 0; i < runs; ++i) await session.run(feeds);
  session.endProfiling();
  const dir = path.dirname(prefix);
  const file = fs.readdirSync(dir).filter((f) => f.endsWith('.json')).map((f) => path.join(dir, f))[0];
  const times = new Map();  // node -> {op, us: [...]}, in first-seen (execution) order
  for (const e of JSON.parse(fs.readFileSync(file, 'utf8'))) {
    if (e.cat !== 'Node' || !e.name.endsWith('_kernel_time')) continue;
    const node = e.name.slice(0, -'_kernel_time'.length);
    if (!times.has(node)) times.set(node, {op: e.args.op_name, us: []});
    times.get(node).us.push(e.dur);
  }
  fs.rmSync(dir, {recursive: true});
  const median = (v) => { const s = [...v].sort((a, b) => a - b); return s[Math.floor(s.length / 2)]; };
  let total = 0;
  for (const [node, {op, us}] of times) {
    const ms = median(us.slice(Number(warmup))) / 1000;
    total += ms;
    console.log(`${node.padEnd(72)} ${op.padEnd(20)} ${ms.toFixed(4)}`);
  }
  console.log(`sum of node medians: ${total.toFixed(3)} ms`);
})().catch((e) => { console.error(e); process.exit(1); });
