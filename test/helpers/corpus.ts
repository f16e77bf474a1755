import { existsSync } from 'node:fs'
import { fileURLToPath } from 'node:url'

const SUITE = 'corpora/json-test-suite/test_parsing/'

/**
 * The JSONTestSuite folder. CI clones the repo with `shared/` beside it, so
 * the repo-relative place comes first; a git worktree kept elsewhere on the
 * development machine has no `shared/` beside it and uses /work/shared.
 */
export function corpusDir(): string {
  const besideRepo = fileURLToPath(new URL(`../../../shared/${SUITE}`, import.meta.url))
  return existsSync(besideRepo) ? besideRepo : `/work/shared/${SUITE}`
}
