// The face detection thread (see faces.ts). It owns the model: TinyFaceDetector from
// @vladmandic/face-api, on TensorFlow.js's WebAssembly backend (single-threaded SIMD in Node),
// weights and .wasm read from inside their npm packages; nothing is fetched. A detection is one
// synchronous run of WebAssembly that cannot be interrupted, which is why it lives on a thread
// the main thread can terminate when a call runs over its time budget.
// Protocol: posts { ready: true } or { fatal } once; then one { id, boxes } or { id, error } for
// each { id, data, width, height } job (RGB bytes, already downscaled to at most INPUT_SIZE).
import { readFileSync } from 'node:fs';
import { createRequire } from 'node:module';
import { dirname, join } from 'node:path';
import vm from 'node:vm';
import { parentPort, workerData } from 'node:worker_threads';

const require = createRequire(import.meta.url);
const { inputSize, scoreThreshold } = workerData;

// face-api's Node build requires the whole '@tensorflow/tfjs' (about 300 MB installed with
// layers, converter, data and WebGL). Detection needs only tfjs-core's ops, so the 86 kB build is
// evaluated here with '@tensorflow/tfjs' answered by tfjs-core, and the chained tensor methods
// that the full package would have added (x.sub(y), x.as3D(...)) are added below.
function loadFaceApi(tf) {
  const file = require.resolve('@vladmandic/face-api/dist/face-api.node-wasm.js');
  const params = ['exports', 'require', 'module', '__filename', '__dirname'];
  const run = vm.compileFunction(readFileSync(file, 'utf8'), params, { filename: file });
  const local = createRequire(file);
  const mod = { exports: {} };
  run(mod.exports, (id) => (id === '@tensorflow/tfjs' ? tf : local(id)), mod, file, dirname(file));
  return mod.exports;
}

function addChainedOps(tf) {
  const proto = tf.Tensor.prototype;
  const special = {
    as1D() {
      return tf.reshape(this, [this.size]);
    },
    as2D(r, c) {
      return tf.reshape(this, [r, c]);
    },
    as3D(r, c, d) {
      return tf.reshape(this, [r, c, d]);
    },
    as4D(r, c, d, e) {
      return tf.reshape(this, [r, c, d, e]);
    },
    asScalar() {
      return tf.reshape(this, []);
    },
    asType(dtype) {
      return tf.cast(this, dtype);
    },
    toFloat() {
      return tf.cast(this, 'float32');
    },
    toInt() {
      return tf.cast(this, 'int32');
    },
    toBool() {
      return tf.cast(this, 'bool');
    },
  };
  for (const [name, fn] of Object.entries(special)) if (!(name in proto)) proto[name] = fn;
  // Every other chained method in tfjs is `op(this, ...args)`.
  for (const [name, op] of Object.entries(tf)) {
    if (typeof op === 'function' && /^[a-z]/.test(name) && !(name in proto)) {
      proto[name] = function (...args) {
        return op(this, ...args);
      };
    }
  }
}

function loadWeights(tf, net, name) {
  const dir = join(dirname(require.resolve('@vladmandic/face-api/package.json')), 'model');
  const manifest = JSON.parse(readFileSync(join(dir, `${name}-weights_manifest.json`), 'utf8'));
  const bin = readFileSync(join(dir, `${name}.bin`));
  const bytes = bin.buffer.slice(bin.byteOffset, bin.byteOffset + bin.byteLength);
  net.loadFromWeightMap(tf.io.decodeWeights(bytes, manifest[0].weights));
}

async function start() {
  const tf = require('@tensorflow/tfjs-core');
  require('@tensorflow/tfjs-backend-wasm');
  addChainedOps(tf);
  const faceapi = loadFaceApi(tf);
  if (!(await tf.setBackend('wasm'))) throw new Error('the WebAssembly backend did not start');
  await tf.ready();
  loadWeights(tf, faceapi.nets.tinyFaceDetector, 'tiny_face_detector_model');
  const options = new faceapi.TinyFaceDetectorOptions({ inputSize, scoreThreshold });
  return async ({ data, width, height }) => {
    const image = tf.tensor3d(data, [height, width, 3], 'int32');
    try {
      const found = await faceapi.detectAllFaces(image, options);
      return found.map((d) => ({ x: d.box.x, y: d.box.y, w: d.box.width, h: d.box.height, score: d.score }));
    } finally {
      image.dispose();
    }
  };
}

start().then(
  (detect) => {
    parentPort.on('message', async (job) => {
      try {
        parentPort.postMessage({ id: job.id, boxes: await detect(job) });
      } catch (err) {
        parentPort.postMessage({ id: job.id, error: String(err?.message ?? err) });
      }
    });
    parentPort.postMessage({ ready: true });
  },
  (err) => parentPort.postMessage({ fatal: String(err?.stack ?? err) }),
);
