/**
 * What the tests are built from: the one test user, the paths and media
 * types, the sample policies and policy builders, and the one factory of
 * request bodies. Every call returns a fresh value to mutate.
 */
import { writeFile } from 'node:fs/promises'
import { join } from 'node:path'
import { fileURLToPath } from 'node:url'
import type { Principal } from '../../lib/checks/auth.js'
import { hashPassword } from '../../lib/credentials/hash.js'
import { CredentialStore } from '../../lib/credentials/store.js'
import type { Rejection } from '../../lib/errors.js'
import {
  compilePolicy,
  staticPolicies,
  type Policy,
  type PolicyFile,
  type PolicySource,
} from '../../lib/policy/policy.js'

/** An scrypt cost, as `hashPassword` takes it. */
export type ScryptParams = NonNullable<Parameters<typeof hashPassword>[1]>

export const USERNAME = 'shop-1'
export const PASSWORD = 'correct horse battery staple'
/**
 * The entities the test user may act for. `ghost` has no policy file (check 10
 * of docs/checks.md); `eu-tokens` has one but is not among them (check 9).
 */
export const ENTITIES = ['default', 'ghost', 'marketplace', 'collections']
/** A cheap scrypt cost: the tests check the flow, not the hash's strength. */
export const TEST_COST: ScryptParams = Object.freeze({ N: 1024, r: 8, p: 1 })

export function basic(username: string, password: string): string {
  return `Basic ${Buffer.from(`${username}:${password}`).toString('base64')}`
}

/** Whether an authenticator's answer is a principal rather than a refusal. */
export function isPrincipal(value: Principal | Rejection): value is Principal {
  return 'username' in value
}

/** The test user's Authorization header. */
export const AUTH = basic(USERNAME, PASSWORD)

async function testUser(cost: ScryptParams) {
  return { username: USERNAME, password: await hashPassword(PASSWORD, cost), entities: ENTITIES }
}

/** Writes `credentials.json` with the test user (a real scrypt hash) into `dir` and returns its path. */
export async function writeCredentials(dir: string, cost: ScryptParams = TEST_COST): Promise<string> {
  const file = join(dir, 'credentials.json')
  await writeFile(file, JSON.stringify({ users: [await testUser(cost)] }))
  return file
}

let store: Promise<CredentialStore> | undefined
/** The test user in memory, hashed once per test process. */
export function testCredentials(): Promise<CredentialStore> {
  store ??= testUser(TEST_COST).then((user) => new CredentialStore([user]))
  return store
}

export const VENDOR = 'example'
export const SALE_PATH = '/payments/sales/migrateCardOnFile'
export const RECURRING_PATH = '/payments/authorizations/migrateRecurring'
/** A path that is neither operation: passed through untouched. */
export const OTHER_PATH = '/status'
export const REQUEST_TYPE = `application/vnd.${VENDOR}.payments-v6+json`
export const RESPONSE_TYPE = `application/vnd.${VENDOR}.payments-v6.hal+json`
/** Small, so that the too-large requests stay small. */
export const BODY_LIMIT = 2048
/** The gate options of the shared case table and of `testGate`. */
export const GATE_OPTIONS = { bodyLimit: BODY_LIMIT, vendor: VENDOR } as const

/** The fingerprints' HMAC key of every test gateway, so that gateways sharing a Redis share it (docs/idempotency.md). */
export const FINGERPRINT_KEY = Buffer.from('the test fleet fingerprint key, 32 bytes and more')

/** `FINGERPRINT_KEY` as `--idempotency-fingerprint-key` reads it: written in `dir`, its path returned. */
export async function writeFingerprintKey(dir: string): Promise<string> {
  const path = join(dir, 'fingerprint-key')
  await writeFile(path, Buffer.concat([FINGERPRINT_KEY, Buffer.from('\n')]))
  return path
}

/** The repository's sample policies: default, collections (line1 reject), eu-tokens, marketplace (Payment Facilitator). */
export const POLICIES_DIR = fileURLToPath(new URL('../../policies', import.meta.url))

export function policyFile(overrides: Partial<PolicyFile> = {}): PolicyFile {
  return {
    entity: 'default',
    currencies: ['GBP', 'EUR', 'USD'],
    paymentInstruments: ['card/plain', 'card/token'],
    features: { dynamicMcc: true, paymentFacilitator: false, moto: true, debtRepayment: false },
    mcc: '5734',
    narrative: { line1: 'truncate' },
    ...overrides,
  }
}

export function policy(overrides: Partial<PolicyFile> = {}): Policy {
  const compiled = compilePolicy(policyFile(overrides))
  if (Array.isArray(compiled)) throw new Error(compiled.join('; '))
  return compiled
}

/** The sample policy for `default`, plus whatever else a test names. */
export function policies(...more: Partial<PolicyFile>[]): PolicySource {
  return staticPolicies([policy(), ...more.map((overrides) => policy(overrides))])
}

/** A valid policy file's content for `entity`, with any top-level key replaced. */
export function policyJson(entity: string, overrides: Record<string, unknown> = {}): string {
  return JSON.stringify({
    entity,
    currencies: ['GBP'],
    paymentInstruments: ['card/plain'],
    features: { dynamicMcc: false, paymentFacilitator: false, moto: false, debtRepayment: false },
    narrative: { line1: 'truncate' },
    ...overrides,
  })
}

export const PAYMENT_FACILITATOR = {
  pfId: 'pf-1',
  subMerchant: {
    city: 'London',
    name: 'Corner Shop',
    postalCode: 'N1 9GU',
    merchantId: 'sub-1',
    countryCode: 'GB',
    street: '1 High Street',
  },
}

/** Two rules of a `--backend-errors` file (docs/backend-faults.md): one by status, one by a member of the body. */
export const BACKEND_ERROR_RULES = [
  { status: 402, errorName: 'paymentIsDeclined', message: 'The payment was declined.' },
  {
    status: '4xx',
    match: { '$.code': 'E_LIMIT' },
    errorName: 'cardLimitIsReached',
    message: 'The card limit is reached.',
  },
]

/** A Luhn-valid test card number (a well-known test PAN, never a real card). */
export const TEST_PAN = '4444333322221111'

/** `entity` sets `merchant.entity`; any other key replaces that top-level key of the body. */
export interface BodyOverrides {
  entity?: string
  [key: string]: unknown
}

/** A clean sale for the `default` entity. */
export function saleBody(overrides: BodyOverrides = {}): Record<string, any> {
  const { entity = 'default', ...rest } = overrides
  return {
    transactionReference: 'order-1234/a',
    merchant: { entity },
    instruction: {
      narrative: { line1: 'Mind Palace Ltd' },
      paymentInstrument: { type: 'card/plain', cardNumber: TEST_PAN, cardExpiryDate: { month: 5, year: 2035 } },
      value: { amount: 250, currency: 'GBP' },
    },
    ...rest,
  }
}

/** A clean recurring authorization: the sale with `intent`, unless `instruction` is given whole. */
export function recurringBody(overrides: BodyOverrides = {}): Record<string, any> {
  const body = saleBody(overrides)
  if (overrides.instruction === undefined) body.instruction.intent = 'subscription'
  return body
}

/** A recurring authorization by card token, in euros. */
export function tokenRecurringBody(overrides: BodyOverrides = {}): Record<string, any> {
  return recurringBody({
    transactionReference: 'sub-42',
    instruction: {
      narrative: { line1: 'Monthly plan' },
      paymentInstrument: { type: 'card/token', href: 'https://tokens.example/t/1' },
      value: { amount: 999, currency: 'EUR' },
      intent: 'subscription',
    },
    ...overrides,
  })
}

export function bytes(value: unknown): Buffer {
  return Buffer.from(JSON.stringify(value))
}
