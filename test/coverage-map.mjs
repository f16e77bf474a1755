// tap's coverage map (package.json's tap `coverage-map`): a test file counts toward the coverage of lib/ ([]) unless it
// is listed here (null), where it runs with no coverage at all, its children included. V8's block coverage multiplies
// the CPU of code run many times over: each file below runs such a loop, and the lines of lib/ it runs are covered by
// the file named beside it.
const UNCOVERED = new Set([
  // Every code point through the masker, a million calls; covered by test/card-mask.test.ts.
  'test/card-mask-unicode.test.ts',
  // The TypeScript compiler, in-process, on the page's example; covered by test/surfaces/report-mode.test.ts.
  'test/docs-node-report.test.ts',
  // The TypeScript compiler, Redocly and swagger-parser on the document; covered by test/openapi.test.ts.
  'test/openapi-tools.test.ts',
])

/** @param {string} file a test file, relative to the repository */
export default function coverageMap(file) {
  return UNCOVERED.has(file) ? null : []
}
