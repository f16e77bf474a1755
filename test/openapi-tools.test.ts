// The tools people feed the OpenAPI document to. Out of coverage (test/coverage-map.mjs): the TypeScript compiler,
// Redocly and swagger-parser under V8's block coverage cost seconds of CPU, and the lines of lib/ they reach are
// covered by test/openapi.test.ts and test/cli/openapi.test.ts.
import { join } from 'node:path'
import { Worker } from 'node:worker_threads'
import { createConfig, lintFromString } from '@redocly/openapi-core'
import openapiTS, { astToString, type OpenAPI3 } from 'openapi-typescript'
import t, { type Test } from 'tap'
import ts from 'typescript'
import { loadBackendErrors } from '../lib/backend-errors/rules.js'
import { MAX_DEPTH } from '../lib/checks/body.js'
import { reject } from '../lib/errors.js'
import { buildOpenApi } from '../lib/openapi.js'
import { REQUEST_EXAMPLES } from '../lib/schema/examples.js'
import { OPERATION_PATHS } from '../lib/schema/payment.js'
import { BACKEND_ERROR_RULES } from './helpers/fixtures.js'

type Json = Record<string, any>

/**
 * The tools people feed an OpenAPI document to, each run in-process through its API: swagger-parser
 * validates and dereferences it, openapi-typescript makes types of it, Redocly lints it with its
 * recommended rules. Each runs on the default document and on one with every option set.
 */
async function documents(t: Test): Promise<[name: string, document: Json][]> {
  const rules = join(
    t.testdir({
      'rules.json': JSON.stringify({
        rules: BACKEND_ERROR_RULES,
      }),
    }),
    'rules.json',
  )
  const options = { vendor: 'acme', basePath: '/api', bodyLimit: 4096, backendErrors: await loadBackendErrors(rules) }
  return [
    ['the default document', buildOpenApi() as Json],
    ['a document with every option', buildOpenApi(options) as Json],
  ]
}

/**
 * swagger-parser's `validate` runs in a worker stopped at the deadline: its dereferencing is synchronous,
 * so a document it cannot finish would otherwise hold the test until tap's timeout. One worker takes the
 * documents in turn, each verdict posted as it is known.
 */
const SWAGGER_PARSER = `
const { parentPort, workerData } = require('node:worker_threads')
import(workerData.parser).then(async ({ default: parser }) => {
  for (const document of workerData.documents)
    parentPort.postMessage(await parser.validate(document).then(() => 'valid', (error) => String(error)))
})
`

async function swaggerParser(documents: Json[], deadline: number): Promise<unknown[]> {
  const parser = import.meta.resolve('@apidevtools/swagger-parser')
  const worker = new Worker(SWAGGER_PARSER, { eval: true, workerData: { parser, documents } })
  const verdicts: unknown[] = []
  let timer: NodeJS.Timeout | undefined
  try {
    return await new Promise((resolve, reject) => {
      worker.on('message', (verdict) => {
        verdicts.push(verdict)
        if (verdicts.length === documents.length) resolve(verdicts)
      })
      worker.once('error', reject)
      timer = setTimeout(
        () => resolve(documents.map((_, i) => (i < verdicts.length ? verdicts[i] : `not done within ${deadline} ms`))),
        deadline,
      )
    })
  } finally {
    clearTimeout(timer)
    await worker.terminate()
  }
}

t.test('swagger-parser validates and dereferences the document in seconds', async (t) => {
  const all = await documents(t)
  const verdicts = await swaggerParser(
    all.map(([, document]) => document),
    20_000,
  )
  t.same(
    verdicts,
    all.map(() => 'valid'),
    all.map(([name]) => name).join(', '),
  )
})

t.test('openapi-typescript makes types of the document that type its examples, and not a wrong body', async (t) => {
  const folders: Record<string, { 'openapi.ts': string; 'usage.ts': string }> = {}
  const named: [folder: string, name: string][] = []
  for (const [name, document] of await documents(t)) {
    const types = astToString(await openapiTS(structuredClone(document) as OpenAPI3))
    const vendor = name === 'the default document' ? 'example' : 'acme'
    const base = name === 'the default document' ? '' : '/api'
    const usage = `import type { components, paths } from './openapi.js'
type Sale = paths['${base}${OPERATION_PATHS.sale}']['post']
export const sale: Sale['requestBody']['content']['application/vnd.${vendor}.payments-v6+json'] = ${JSON.stringify(REQUEST_EXAMPLES.sale)}
export const recurring: components['schemas']['MigrateRecurringAuthorization'] = ${JSON.stringify(REQUEST_EXAMPLES.recurring)}
export const refused: Sale['responses'][400]['content']['application/json'] = ${JSON.stringify(reject('bodyIsEmpty').body)}
// @ts-expect-error a transactionReference is a string
export const wrong: components['schemas']['CardOnFileSale'] = ${JSON.stringify({ ...REQUEST_EXAMPLES.sale, transactionReference: 1 })}
`
    const folder = `document-${named.length}`
    folders[folder] = { 'openapi.ts': types, 'usage.ts': usage }
    named.push([folder, name])
    t.match(types, `@description Objects and arrays nested at most ${MAX_DEPTH} levels deep`, 'the limits in the types')
  }
  const dir = t.testdir(folders)
  // One program for every document's folder: TypeScript's lib is read and bound once, not once a document.
  const program = ts.createProgram(
    Object.keys(folders).map((folder) => join(dir, folder, 'usage.ts')),
    {
      strict: true,
      noEmit: true,
      skipLibCheck: true,
      target: ts.ScriptTarget.ES2022,
      module: ts.ModuleKind.ESNext,
      moduleResolution: ts.ModuleResolutionKind.Bundler,
      lib: ['lib.es2022.d.ts'],
      types: [],
    },
  )
  const message = (diagnostic: ts.Diagnostic) => ts.flattenDiagnosticMessageText(diagnostic.messageText, '\n')
  t.same([...program.getOptionsDiagnostics(), ...program.getGlobalDiagnostics()].map(message), [], 'no global error')
  for (const [folder, name] of named) {
    const errors = program
      .getSourceFiles()
      .filter((source) => source.fileName.startsWith(join(dir, folder, '/')))
      .flatMap((source) => [...program.getSyntacticDiagnostics(source), ...program.getSemanticDiagnostics(source)])
    t.same(errors.map(message), [], name)
  }
})

t.test("Redocly's recommended rules: no error; a license only the backend's owner can state", async (t) => {
  const config = await createConfig({ extends: ['recommended'] })
  for (const [name, document] of await documents(t)) {
    const problems = await lintFromString({ source: JSON.stringify(document), absoluteRef: '/openapi.json', config })
    t.same(
      problems.map((problem) => `${problem.severity} ${problem.ruleId}: ${problem.message}`),
      ['warn info-license: Info object should contain `license` field.'],
      name,
    )
  }
})
