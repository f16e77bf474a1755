import { execFileSync } from 'node:child_process'
import { readdirSync, readFileSync } from 'node:fs'
import { join, relative } from 'node:path'
import t from 'tap'
import { uncovered } from './helpers/uncovered.js'

/**
 * `npm run fuzz` (scripts/fuzz.js) runs every property test: the oracle reads each test file's imports, where the
 * script looks for calls, so a property test that `npm run fuzz` would leave out (the fixed seed of `npm test`
 * its only run) fails here.
 */
const root = new URL('..', import.meta.url).pathname
/** The script is a tool of the repository's, outside lib/'s coverage. */
const NOT_COVERED = { ...process.env, _TAPJS_PROCESSINFO_COVERAGE_: '0' }
const IMPORTS_RUNS = /^import \{[^}]*\bruns\b[^}]*\} from '(?:\.\/|(?:\.\.\/)+)helpers\/fuzz\.js'$/m

function testFiles(dir: string): string[] {
  return readdirSync(dir, { withFileTypes: true }).flatMap((entry) =>
    entry.isDirectory()
      ? testFiles(join(dir, entry.name))
      : entry.name.endsWith('.test.ts')
        ? [relative(root, join(dir, entry.name))]
        : [],
  )
}

t.test('npm run fuzz is the script, and docs/development.md names it', async (t) => {
  const { scripts } = JSON.parse(readFileSync(join(root, 'package.json'), 'utf8')) as {
    scripts: Record<string, string>
  }
  t.equal(scripts.fuzz, 'node scripts/fuzz.js')
  t.match(readFileSync(join(root, 'docs/development.md'), 'utf8'), /npm run fuzz +# every property test/)
})

t.test('npm run fuzz lists every test file that draws its cases through runs, and no other', async (t) => {
  const listed = execFileSync(...uncovered(['scripts/fuzz.js', '--list'], NOT_COVERED), { cwd: root, encoding: 'utf8' })
    .trim()
    .split('\n')
  const drawing = testFiles(join(root, 'test')).filter((file) =>
    IMPORTS_RUNS.test(readFileSync(join(root, file), 'utf8')),
  )
  t.same(listed, drawing.sort())
  t.ok(listed.includes('test/property/backend-answers.test.ts'), 'the property tests')
  t.ok(listed.includes('test/idempotency/canonical.test.ts'), 'and those beside lib/')
})
