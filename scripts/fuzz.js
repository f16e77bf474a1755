// npm run fuzz: every property test of the repository, the test files that draw their cases through
// test/helpers/fuzz.ts's `runs`, with 20,000 cases each (FUZZ_RUNS) and, unless FUZZ_SEED is given, a seed of
// their own, printed first: npm test's fixed seed meets the same cases every time (docs/reliability.md).
// `--list` prints the files and runs nothing.
import { spawn } from 'node:child_process'
import { randomInt } from 'node:crypto'
import { readdirSync, readFileSync } from 'node:fs'
import { join, relative } from 'node:path'
import { fileURLToPath } from 'node:url'

const root = fileURLToPath(new URL('..', import.meta.url))

/** The test files under `dir` whose cases `runs` bounds and seeds. */
function fuzzFiles(dir) {
  const files = []
  for (const entry of readdirSync(dir, { withFileTypes: true })) {
    const path = join(dir, entry.name)
    if (entry.isDirectory()) files.push(...fuzzFiles(path))
    else if (entry.name.endsWith('.test.ts') && /\bruns\(/.test(readFileSync(path, 'utf8'))) files.push(path)
  }
  return files
}

const files = fuzzFiles(join(root, 'test'))
  .map((file) => relative(root, file))
  .sort()

if (process.argv.includes('--list')) {
  console.log(files.join('\n'))
} else {
  // fast-check takes a 32-bit seed; helpers/fuzz.ts reads it with Number().
  const seed = process.env.FUZZ_SEED ?? String(randomInt(2 ** 31 - 1))
  const runs = process.env.FUZZ_RUNS ?? '20000'
  console.log(`FUZZ_SEED=${seed} FUZZ_RUNS=${runs} (give both to run a failure again), ${files.length} files`)
  const tap = spawn('tap', ['--disable-coverage', '--timeout=1800', ...files], {
    cwd: root,
    stdio: 'inherit',
    env: { ...process.env, FUZZ_SEED: seed, FUZZ_RUNS: runs },
  })
  tap.on('exit', (code, signal) => process.exit(code ?? (signal === null ? 1 : 128)))
}
