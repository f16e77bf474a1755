/**
 * One table of requests and the gateway's answers, every row of CONTRACT.md's
 * check table plus 405, a clean pass of each operation and an untouched path.
 * The embedding tests run it against the node handler, Express and Fastify;
 * the proxy's end-to-end tests can run the same rows, so the answers cannot
 * drift. Build the gate (or the proxy) with GATE_OPTIONS and the files of
 * `writeGateFiles`.
 */
import { writeFile } from 'node:fs/promises'
import { join } from 'node:path'
import { fileURLToPath } from 'node:url'
import { ACCESS_DENIED } from '../../lib/checks/auth.js'
import { hashPassword } from '../../lib/credentials.js'
import { reject, type ErrorName, type Rejection } from '../../lib/errors.js'
import { recurringBody, saleBody } from './case-bodies.js'

export const SALE_PATH = '/payments/sales/migrateCardOnFile'
export const RECURRING_PATH = '/payments/authorizations/migrateRecurring'
export const OTHER_PATH = '/status'
export const REQUEST_TYPE = 'application/vnd.example.payments-v6+json'
export const RESPONSE_TYPE = 'application/vnd.example.payments-v6.hal+json'
/** Small, so that the too-large rows stay small. */
export const BODY_LIMIT = 2048
/** The repository's sample policies: default, collections (line1 reject), eu-tokens, marketplace (Payment Facilitator). */
export const POLICIES_DIR = fileURLToPath(new URL('../../policies', import.meta.url))
export const GATE_OPTIONS = { bodyLimit: BODY_LIMIT, vendor: 'example' } as const

export const USERNAME = 'shop-1'
export const PASSWORD = 'correct horse battery staple'
/** `ghost` has no policy file: row 10. `eu-tokens` is not among them: row 9. */
export const ENTITIES = ['default', 'ghost', 'marketplace', 'collections']

/** Writes a credentials file with one user (real scrypt hash) and returns its path. */
export async function writeCredentials(dir: string): Promise<string> {
  const file = join(dir, 'credentials.json')
  const users = [{ username: USERNAME, password: await hashPassword(PASSWORD), entities: ENTITIES }]
  await writeFile(file, JSON.stringify({ users }))
  return file
}

export function basic(username: string, password: string): string {
  return `Basic ${Buffer.from(`${username}:${password}`).toString('base64')}`
}

export interface Case {
  /** What the row shows, with its number in CONTRACT.md's check table. */
  readonly name: string
  readonly method: string
  readonly path: string
  readonly headers: Readonly<Record<string, string>>
  readonly body?: string | Buffer
  /** Send the body chunked, without Content-Length. */
  readonly chunked?: boolean
  readonly status: number
  /** Undefined when the request goes through to the application. */
  readonly errorName?: ErrorName
  /** The whole expected answer, where its message is the table's default. */
  readonly rejection?: Rejection
  /** Response headers the answer must carry (lower-case names). */
  readonly responseHeaders?: Readonly<Record<string, string>>
}

const AUTH = basic(USERNAME, PASSWORD)
const GOOD = { authorization: AUTH, 'content-type': REQUEST_TYPE, accept: RESPONSE_TYPE }
const json = (value: unknown) => JSON.stringify(value)
const sale = (overrides: Parameters<typeof saleBody>[0] = {}) => json(saleBody(overrides))
const instruction = (changes: Record<string, unknown>) => ({ ...(saleBody().instruction as Record<string, unknown>), ...changes })
const CHALLENGE = { 'www-authenticate': 'Basic realm="payments", charset="UTF-8"' }

/**
 * A clean sale padded with an unnamed field to exactly `bytes` bytes of UTF-8,
 * with a `transactionReference` of its own: it is another payment than the
 * clean sale's, and the proxy's retry protection tells them apart by it.
 */
function saleOfSize(bytes: number, transactionReference: string): string {
  const unpadded = Buffer.byteLength(sale({ transactionReference, padding: '' }))
  const body = sale({ transactionReference, padding: 'x'.repeat(bytes - unpadded) })
  if (Buffer.byteLength(body) !== bytes) throw new Error(`a sale of ${bytes} bytes cannot be built (${unpadded} without padding)`)
  return body
}

export const CASES: readonly Case[] = [
  { name: 'clean sale passes', method: 'POST', path: SALE_PATH, headers: GOOD, body: sale(), status: 201 },
  { name: 'clean recurring passes', method: 'POST', path: RECURRING_PATH, headers: GOOD, body: json(recurringBody()), status: 201 },
  { name: 'clean sale, chunked, with a query string', method: 'POST', path: `${SALE_PATH}?trace=1`, headers: GOOD, body: sale(), chunked: true, status: 201 },
  { name: 'another path is untouched', method: 'GET', path: OTHER_PATH, headers: {}, status: 200 },
  { name: '405: GET on an operation path', method: 'GET', path: SALE_PATH, headers: { authorization: AUTH }, status: 405, errorName: 'methodIsNotAllowed', rejection: reject('methodIsNotAllowed', { headers: { Allow: 'POST' } }), responseHeaders: { allow: 'POST' } },
  { name: '1: no Authorization', method: 'POST', path: SALE_PATH, headers: { 'content-type': REQUEST_TYPE }, body: sale(), status: 401, errorName: 'accessDenied', rejection: ACCESS_DENIED, responseHeaders: CHALLENGE },
  { name: '1: wrong password', method: 'POST', path: SALE_PATH, headers: { ...GOOD, authorization: basic(USERNAME, 'wrong') }, body: sale(), status: 401, errorName: 'accessDenied', rejection: ACCESS_DENIED, responseHeaders: CHALLENGE },
  { name: '1: unknown user', method: 'POST', path: RECURRING_PATH, headers: { ...GOOD, authorization: basic('nobody', PASSWORD) }, body: sale(), status: 401, errorName: 'accessDenied', rejection: ACCESS_DENIED, responseHeaders: CHALLENGE },
  { name: '1: not Basic', method: 'POST', path: SALE_PATH, headers: { ...GOOD, authorization: 'Bearer abc' }, body: sale(), status: 401, errorName: 'accessDenied', rejection: ACCESS_DENIED, responseHeaders: CHALLENGE },
  { name: '2: no Content-Type', method: 'POST', path: SALE_PATH, headers: { authorization: AUTH }, body: sale(), status: 400, errorName: 'headerIsMissing' },
  { name: '3: Content-Type application/json', method: 'POST', path: SALE_PATH, headers: { ...GOOD, 'content-type': 'application/json' }, body: sale(), status: 415, errorName: 'headerHasInvalidValue' },
  { name: '3: Content-Type with charset latin1', method: 'POST', path: SALE_PATH, headers: { ...GOOD, 'content-type': `${REQUEST_TYPE}; charset=latin1` }, body: sale(), status: 415, errorName: 'headerHasInvalidValue' },
  { name: '3: upper-case Content-Type with charset utf-8 passes', method: 'POST', path: SALE_PATH, headers: { ...GOOD, 'content-type': `${REQUEST_TYPE.toUpperCase()}; charset=UTF-8` }, body: sale(), status: 201 },
  { name: '4: Accept text/html', method: 'POST', path: SALE_PATH, headers: { ...GOOD, accept: 'text/html' }, body: sale(), status: 406, errorName: 'headerHasInvalidValue' },
  { name: '5: declared body too large', method: 'POST', path: SALE_PATH, headers: GOOD, body: sale({ padding: 'x'.repeat(BODY_LIMIT) }), status: 413, errorName: 'bodyIsTooLarge' },
  { name: '5: chunked body too large', method: 'POST', path: SALE_PATH, headers: GOOD, body: sale({ padding: 'x'.repeat(BODY_LIMIT) }), chunked: true, status: 413, errorName: 'bodyIsTooLarge' },
  { name: '5: body of exactly the limit passes', method: 'POST', path: SALE_PATH, headers: GOOD, body: saleOfSize(BODY_LIMIT, 'limit-1'), status: 201 },
  { name: '5: body of exactly the limit passes, chunked', method: 'POST', path: SALE_PATH, headers: GOOD, body: saleOfSize(BODY_LIMIT, 'limit-2'), chunked: true, status: 201 },
  { name: '5: declared body one byte over the limit', method: 'POST', path: SALE_PATH, headers: GOOD, body: saleOfSize(BODY_LIMIT + 1, 'limit-3'), status: 413, errorName: 'bodyIsTooLarge' },
  { name: '5: chunked body one byte over the limit', method: 'POST', path: SALE_PATH, headers: GOOD, body: saleOfSize(BODY_LIMIT + 1, 'limit-4'), chunked: true, status: 413, errorName: 'bodyIsTooLarge' },
  { name: '6: empty body', method: 'POST', path: SALE_PATH, headers: GOOD, body: '', status: 400, errorName: 'bodyIsEmpty', rejection: reject('bodyIsEmpty') },
  { name: '6: white space only', method: 'POST', path: RECURRING_PATH, headers: GOOD, body: ' \r\n\t ', status: 400, errorName: 'bodyIsEmpty', rejection: reject('bodyIsEmpty') },
  { name: '7: not JSON', method: 'POST', path: SALE_PATH, headers: GOOD, body: '{"transactionReference":', status: 400, errorName: 'bodyIsNotJson', rejection: reject('bodyIsNotJson') },
  { name: '7: not UTF-8', method: 'POST', path: SALE_PATH, headers: GOOD, body: Buffer.from([0x7b, 0x22, 0xff, 0x22, 0x3a, 0x31, 0x7d]), status: 400, errorName: 'bodyIsNotJson' },
  { name: '8: schema problems', method: 'POST', path: SALE_PATH, headers: GOOD, body: sale({ transactionReference: '', channel: 'post' }), status: 400, errorName: 'bodyDoesNotMatchSchema' },
  { name: '8: sale-only field in a recurring request', method: 'POST', path: RECURRING_PATH, headers: GOOD, body: json({ ...recurringBody(), channel: 'moto' }), status: 400, errorName: 'bodyDoesNotMatchSchema' },
  { name: '8: prototype key', method: 'POST', path: SALE_PATH, headers: GOOD, body: sale({ __proto__x: 1 }).replace('__proto__x', '__proto__'), status: 400, errorName: 'bodyDoesNotMatchSchema' },
  { name: '9: entity the user may not act for', method: 'POST', path: SALE_PATH, headers: GOOD, body: sale({ entity: 'eu-tokens' }), status: 401, errorName: 'accessDenied', rejection: ACCESS_DENIED, responseHeaders: CHALLENGE },
  { name: '10: entity without a policy', method: 'POST', path: SALE_PATH, headers: GOOD, body: sale({ entity: 'ghost' }), status: 400, errorName: 'entityIsNotConfigured', rejection: reject('entityIsNotConfigured') },
  { name: '10+: Payment Facilitator entity without paymentFacilitator', method: 'POST', path: SALE_PATH, headers: GOOD, body: sale({ entity: 'marketplace' }), status: 400, errorName: 'bodyDoesNotMatchSchema' },
  { name: '10+: line1 too long where the policy says reject', method: 'POST', path: SALE_PATH, headers: GOOD, body: sale({ entity: 'collections', instruction: { ...instruction({}), value: { amount: 1, currency: 'GBP' } } }), status: 400, errorName: 'bodyDoesNotMatchSchema' },
  { name: '11: payment instrument not in the policy', method: 'POST', path: SALE_PATH, headers: GOOD, body: sale({ instruction: instruction({ paymentInstrument: { type: 'wallet/x' } }) }), status: 400, errorName: 'paymentInstrumentIsNotSupported', rejection: reject('paymentInstrumentIsNotSupported') },
  { name: '12: currency not in the policy', method: 'POST', path: SALE_PATH, headers: GOOD, body: sale({ instruction: instruction({ value: { amount: 1, currency: 'JPY' } }) }), status: 400, errorName: 'currencyIsNotSupported', rejection: reject('currencyIsNotSupported') },
  { name: '13: paymentFacilitator on an entity that is not one', method: 'POST', path: SALE_PATH, headers: GOOD, body: sale({ merchant: { entity: 'default', paymentFacilitator: { pfId: 'pf', subMerchant: { city: 'c', name: 'n', postalCode: 'p', merchantId: 'm', countryCode: 'GB', street: 's' } } } }), status: 400, errorName: 'merchantIsNotConfigured' },
  { name: '13: debtRepayment not enabled', method: 'POST', path: SALE_PATH, headers: GOOD, body: sale({ instruction: instruction({ debtRepayment: true }) }), status: 400, errorName: 'merchantIsNotConfigured' },
]
