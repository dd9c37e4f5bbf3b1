// Runs lossops conformance models on onnxruntime-node, or onnxruntime-web (its WebAssembly build), in Node.js
// for conformance/consumers.py: `node ort_node_runner.js <package>`, then one request per line on stdin, {"model": path, "inputs": [{"name", "type", "dims", "file"}], "output": path}; each input is raw
// little-endian data in a file. Answers one line per request: {"type", "dims"} with output 0's data written
// to "output", or {"error": message}.
"use strict";
const fs = require("fs");
const readline = require("readline");
const ort = require(process.argv[2]);

const ARRAYS = { float32: Float32Array, float64: Float64Array, float16: Uint16Array, int64: BigInt64Array };

function load(input) {
  const bytes = fs.readFileSync(input.file);
  const Array = ARRAYS[input.type];
  const copy = new Uint8Array(bytes.length);
  copy.set(bytes);
  return new ort.Tensor(input.type, new Array(copy.buffer, 0, bytes.length / Array.BYTES_PER_ELEMENT), input.dims);
}

async function answer(request) {
  const session = await ort.InferenceSession.create(request.model);
  const feeds = {};
  for (const input of request.inputs) feeds[input.name] = load(input);
  const results = await session.run(feeds);
  const out = results[session.outputNames[0]];
  const data = out.data;
  fs.writeFileSync(request.output, Buffer.from(data.buffer, data.byteOffset, data.byteLength));
  await session.release();
  return { type: out.type, dims: Array.from(out.dims) };
}

const lines = readline.createInterface({ input: process.stdin });
let queue = Promise.resolve();
lines.on("line", (line) => {
  queue = queue.then(async () => {
    let reply;
    try {
      reply = await answer(JSON.parse(line));
    } catch (e) {
      reply = { error: String(e && e.message ? e.message : e) };
    }
    process.stdout.write(JSON.stringify(reply) + "\n");
  });
});
