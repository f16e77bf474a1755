import { fileURLToPath } from 'node:url'

/**
 * The JSONTestSuite folder: in `shared/` beside the repository, as CI lays it
 * out; JSON_TEST_SUITE names another place (a git worktree kept elsewhere).
 */
export function corpusDir(): string {
  return process.env.JSON_TEST_SUITE ?? fileURLToPath(new URL('../../../shared/corpora/json-test-suite/test_parsing/', import.meta.url))
}
