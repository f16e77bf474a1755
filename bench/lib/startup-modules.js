// Loaded with `node --import` into a profiled start (bench/startup.js --profile): every module the start
// loads, with the size of its source, written as JSON beside the CPU profile when the process exits.
import { writeFileSync } from 'node:fs'
import { registerHooks } from 'node:module'
import { join } from 'node:path'

const loaded = []
registerHooks({
  load(url, context, next) {
    const result = next(url, context)
    loaded.push([url, result.source === undefined || result.source === null ? 0 : Buffer.byteLength(result.source)])
    return result
  },
})
process.on('exit', () =>
  writeFileSync(join(process.env.BENCH_MODULES_DIR, `modules-${process.pid}.json`), JSON.stringify(loaded)),
)
