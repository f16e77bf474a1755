import { randomBytes } from 'node:crypto'
import { hashPassword } from '../credentials/hash.js'
import { CredentialStore } from '../credentials/store.js'
import { DEFAULTS, mediaTypes } from '../defaults.js'
import { loadPolicyDir } from '../policy/load.js'
import { startDemoBackend, type DemoBackend } from '../demo/backend.js'
import {
  OPERATION_PATHS,
  type Operation,
  type PaymentRequest,
  type RecurringRequest,
  type SaleRequest,
} from '../schema/payment.js'
import { option, parseFlags, type CommandSpec } from './flags.js'
import { EXIT_OK, type Command, type Io } from './io.js'
import { SHARED_FLAGS } from './options.js'
import { SAMPLE_POLICIES } from '../package-files.js'
import { startServing, type Serving } from './serve.js'
import { stopSignals } from './signals.js'
import { unreadable } from './startup.js'

const DEMO_FLAGS = {
  listen: {
    ...SHARED_FLAGS.listen,
    summary: 'where the gateway listens; on loopback unless a host is given, since the demo prints a working password',
    shown: '`127.0.0.1:8080`',
  },
  // The samples the package ships, wherever the demo is started: an empty project has no ./policies.
  policies: option({
    value: 'DIR',
    summary: SHARED_FLAGS.policies.summary,
    parse: (text) => text,
    default: SAMPLE_POLICIES,
    shown: "the package's sample policies",
    see: '[policies](policies.md#sample-policies)',
  }),
}

export const spec: CommandSpec<typeof DEMO_FLAGS> = {
  name: 'demo',
  usage: '[flags]',
  description:
    'Starts a demo backend on a free loopback port and the gateway in front of it, with a demo user whose random password it prints with ready curl lines: a sale, a recurring authorization, a refused sale. Ctrl-C stops it, without the shutdown delay of serve.',
  env: false,
  positionals: 0,
  flags: DEMO_FLAGS,
}

export const DEMO_USER = 'demo'
/**
 * The well-known Luhn-valid test card number (not a real card), kept in its
 * printed groups so that no whole card number sits in library code.
 */
export const DEMO_PAN = '4444 3333 2222 1111'.replaceAll(' ', '')

const DEMO_MEDIA_TYPES = mediaTypes(DEFAULTS.vendor)

/** A request the demo prints as a `curl` line. */
export interface Example {
  readonly url: string
  readonly headers: Readonly<Record<string, string>>
  readonly body: string
}

export interface Demo {
  readonly serving: Serving
  readonly backend: DemoBackend
  readonly password: string
  /** A sale that passes every check and reaches the demo backend. */
  readonly accepted: Example
  /** A recurring authorization that passes every check: the sale's fields with the `intent` it requires. */
  readonly recurring: Example
  /** The sale with a card number that fails the Luhn check. */
  readonly refused: Example
  stop(): Promise<void>
}

/** A sale on the demo's card: its narrative holds characters the gateway cleans, and the policy fills its mcc in. */
function sale(cardNumber: string): SaleRequest {
  return {
    transactionReference: 'demo-order-1',
    merchant: { entity: 'default' },
    instruction: {
      narrative: { line1: 'Demo shop – order #1' },
      paymentInstrument: { type: 'card/plain', cardNumber, cardExpiryDate: { month: 12, year: 2030 } },
      value: { amount: 250, currency: 'GBP' },
    },
  }
}

/**
 * A recurring authorization: the fields of a sale, with the `instruction.intent` it requires
 * (`subscription` or `instalment`) and none of the sale's own (`channel`, `customer`, `instruction.scheme`).
 */
function recurring(cardNumber: string): RecurringRequest {
  return {
    transactionReference: 'demo-subscription-1',
    merchant: { entity: 'default' },
    instruction: {
      intent: 'subscription',
      narrative: { line1: 'Demo shop subscription' },
      paymentInstrument: { type: 'card/plain', cardNumber, cardExpiryDate: { month: 12, year: 2030 } },
      value: { amount: 999, currency: 'GBP' },
    },
  }
}

function example(base: string, password: string, operation: Operation, body: PaymentRequest): Example {
  return {
    url: `${base}${OPERATION_PATHS[operation]}`,
    headers: {
      Authorization: `Basic ${Buffer.from(`${DEMO_USER}:${password}`).toString('base64')}`,
      'Content-Type': DEMO_MEDIA_TYPES.request,
      Accept: DEMO_MEDIA_TYPES.response,
    },
    body: JSON.stringify(body),
  }
}

/** One line to paste in a POSIX shell. */
export function curlLine({ url, headers, body }: Example): string {
  const quote = (text: string) => `'${text.replace(/'/g, `'\\''`)}'`
  const flags = Object.entries(headers).map(([name, value]) => `-H ${quote(`${name}: ${value}`)}`)
  return ['curl -i', ...flags, `--data ${quote(body)}`, quote(url)].join(' ')
}

/**
 * `payments-gate demo`: an embedded backend on a loopback port, the gateway in
 * front of it with the sample policies, and a demo user made up at start (its
 * password is random, so the demo never ships a known credential).
 */
export async function startDemo(args: string[], io: Io): Promise<Demo> {
  const { values, where } = parseFlags(spec, args, io.env)
  // The demo prints a working password: it listens on loopback unless told otherwise.
  const listen = { host: values.listen.host ?? DEFAULTS.demoHost, port: values.listen.port }
  const { policies } = await loadPolicyDir(values.policies).catch((error: unknown) => {
    throw unreadable(error, where)
  })
  const password = randomBytes(12).toString('base64url')
  const credentials = new CredentialStore([
    { username: DEMO_USER, password: await hashPassword(password), entities: [...policies.keys()] },
  ])
  const backend = await startDemoBackend((error) =>
    io.stderr.write(`payments-gate demo: the demo backend could not accept a connection: ${error.message}\n`),
  )
  let serving: Serving
  try {
    serving = await startServing(
      {
        listen,
        target: new URL(backend.url),
        policies: values.policies,
        credentials,
        vendor: DEFAULTS.vendor,
        basePath: DEFAULTS.basePath,
        bodyLimit: DEFAULTS.bodyLimit,
        timeout: DEFAULTS.timeout,
        admin: undefined,
        where,
      },
      io,
    )
  } catch (error) {
    await backend.close()
    throw error
  }
  const { host } = listen
  const base = `http://${host.includes(':') ? `[${host}]` : host}:${serving.address.port}`
  const accepted = example(base, password, 'sale', sale(DEMO_PAN))
  const recurringExample = example(base, password, 'recurring', recurring(DEMO_PAN))
  const refused = example(base, password, 'sale', sale(`${DEMO_PAN.slice(0, -1)}2`))
  io.stderr.write(
    `\npayments-gate demo: gateway on ${base}, demo backend on ${backend.url}\n` +
      `user "${DEMO_USER}", password "${password}", entities ${[...policies.keys()].join(', ')}\n\n` +
      `A sale that passes every check (the backend answers 201 and echoes what it received):\n\n  ${curlLine(accepted)}\n\n` +
      `A recurring authorization, the sale's fields with instruction.intent ("subscription" or "instalment"):\n\n  ${curlLine(recurringExample)}\n\n` +
      `The sale with a card number that fails the Luhn check (the gateway answers 400):\n\n  ${curlLine(refused)}\n\n` +
      `Ctrl-C stops the demo.\n\n`,
  )
  return {
    serving,
    backend,
    password,
    accepted,
    recurring: recurringExample,
    refused,
    async stop() {
      await serving.stop()
      await backend.close()
    },
  }
}

export const run: Command = async (args, io) => {
  const signals = stopSignals()
  const demo = await startDemo(args, io)
  await signals.stop
  await demo.stop()
  return EXIT_OK
}
