// Builds, once, everything the micro benchmarks call: the gate's checks, both
// compiled validators, the bodies, and a credential store with a real hash.
import { readFileSync } from 'node:fs'
import Ajv from 'ajv'
import { buildChecks } from '../../dist/checks/index.js'
import { compilePolicy, staticPolicies } from '../../dist/policy/policy.js'
import { luhnValid } from '../../dist/luhn.js'
import { LUHN_FORMAT, REQUEST_SCHEMAS } from '../../dist/schema/bodies.js'
import { compileSchema } from '../../dist/schema/compile.js'
import { ACCEPT, CONTENT_TYPE, bytesOf, invalidSale, paddedSale, validSale, worstCaseSale } from '../lib/fixtures.js'

export function loadPolicy() {
  const policy = compilePolicy(
    JSON.parse(readFileSync(new URL('../../policies/default.json', import.meta.url), 'utf8')),
  )
  if (Array.isArray(policy)) throw new Error(`policies/default.json: ${policy.join('; ')}`)
  return policy
}

export function setup() {
  const checks = buildChecks({ policies: staticPolicies([loadPolicy()]), vendor: 'example' })
  const typebox = compileSchema(REQUEST_SCHEMAS.sale)
  // Same JSON Schema; strict off because it carries OpenAPI annotations (discriminator, x-format).
  const ajvFirst = new Ajv.default({ strict: false })
  ajvFirst.addFormat(LUHN_FORMAT, luhnValid)
  const ajvAll = new Ajv.default({ strict: false, allErrors: true })
  ajvAll.addFormat(LUHN_FORMAT, luhnValid)
  const valid = bytesOf(validSale())
  const invalid = bytesOf(invalidSale())
  const worst = bytesOf(worstCaseSale(checks.bodyLimit))
  return {
    checks,
    typebox,
    ajv: ajvFirst.compile(REQUEST_SCHEMAS.sale),
    ajvAll: ajvAll.compile(REQUEST_SCHEMAS.sale),
    bytes: { valid, invalid, worst, padded: bytesOf(paddedSale(checks.bodyLimit)) },
    text: { valid: valid.toString(), invalid: invalid.toString() },
    docs: {
      valid: JSON.parse(valid.toString()),
      invalid: JSON.parse(invalid.toString()),
      worst: JSON.parse(worst.toString()),
    },
    headers: {
      exact: { 'content-type': CONTENT_TYPE, accept: ACCEPT, 'content-length': String(valid.length) },
      parsed: {
        'content-type': `${CONTENT_TYPE.toUpperCase()}; charset=UTF-8`,
        accept: `text/html;q=0.9, application/json;q=0.8, ${ACCEPT};q=0.7, */*;q=0.1`,
        'content-length': String(valid.length),
      },
    },
  }
}
