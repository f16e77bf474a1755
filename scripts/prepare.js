// npm runs `prepare` after `npm ci` or `npm install` in a clone, and before `npm pack`: it builds
// dist/. With `--omit=dev` (the image's final stage, docs/deployment.md) TypeScript is not there to
// build with, and dist/ comes from elsewhere (the image's build stage): say so, and let the install succeed.
import { spawnSync } from 'node:child_process'
import { createRequire } from 'node:module'

let tsc
try {
  tsc = createRequire(import.meta.url).resolve('typescript/bin/tsc')
} catch {
  console.error('prepare: TypeScript is not installed (npm ci --omit=dev): dist/ not built')
  process.exit(0)
}
const build = spawnSync(process.execPath, [tsc, '-p', 'tsconfig.build.json'], { stdio: 'inherit' })
if (build.status === 0) await import('./bundle-cli.js')
process.exit(build.status ?? 1)
