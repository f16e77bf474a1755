import type { IncomingMessage } from 'node:http'
import { createRequire } from 'node:module'
import fc from 'fast-check'
import t from 'tap'
import { addForwardedHeaders, clientAddress } from '../../lib/proxy/x-forwarded.js'
import { runs } from '../helpers/fuzz.js'

/** proxy-addr, what Express (`trust proxy`) and Fastify (`trustProxy`, its fork) read the client's address with. */
const proxyAddr = createRequire(import.meta.url)('proxy-addr') as (
  req: IncomingMessage,
  trust: (address: string, hop: number) => boolean,
) => string

/** What clientAddress reads of a request: its connection's peer and its X-Forwarded-For. */
function request(forwardedFor: string | undefined, peer: string | null = '10.0.0.9'): IncomingMessage {
  return {
    socket: { remoteAddress: peer ?? undefined },
    headers: forwardedFor === undefined ? {} : { 'x-forwarded-for': forwardedFor },
  } as unknown as IncomingMessage
}

t.test('no trusted proxy: the connection itself, whatever the header says', async (t) => {
  t.equal(clientAddress(request('1.1.1.1'), 0), '10.0.0.9')
  t.equal(clientAddress(request(undefined, null), 0), undefined, 'a socket already gone')
})

t.test('N trusted proxies: the Nth entry from the right, never a further one', async (t) => {
  const header = '6.6.6.6 , 203.0.113.7,10.0.0.2,  10.0.0.3'
  t.equal(clientAddress(request(header), 1), '10.0.0.3')
  t.equal(clientAddress(request(header), 2), '10.0.0.2')
  t.equal(clientAddress(request(header), 3), '203.0.113.7')
  t.equal(clientAddress(request(header), 4), '6.6.6.6', 'the leftmost only when it is the Nth')
  t.equal(clientAddress(request(header), 5), '10.0.0.9', 'fewer entries than hops: the peer')
  t.equal(clientAddress(request('2001:db8::1'), 1), '2001:db8::1')
  t.equal(clientAddress(request(undefined), 1), '10.0.0.9', 'no header')
  t.equal(clientAddress(request('1.1.1.1, '), 1), '10.0.0.9', 'an empty entry names nobody')
  t.equal(clientAddress(request(',1.1.1.1'), 2), '10.0.0.9')
})

t.test('a request that came over TLS (--tls-cert): https, and 443 when its Host names no port', async (t) => {
  const overTls = { socket: { remoteAddress: '10.0.0.9', encrypted: true }, headers: {} } as unknown as IncomingMessage
  const headers: Record<string, string> = { host: 'gateway.example', 'x-forwarded-proto': 'https' }
  addForwardedHeaders(headers, overTls)
  t.match(headers, {
    'x-forwarded-proto': 'https,https',
    'x-forwarded-port': '443',
    'x-forwarded-for': '10.0.0.9',
    'x-forwarded-host': 'gateway.example',
  })
  const plain: Record<string, string> = {}
  addForwardedHeaders(plain, { socket: { remoteAddress: '10.0.0.9' }, headers: {} } as unknown as IncomingMessage)
  t.match(plain, { 'x-forwarded-proto': 'http', 'x-forwarded-port': '80', 'x-forwarded-host': '' })
})

/** The X-Forwarded-Port a request with this `Host` gets, over TLS or not. */
function forwardedPort(host: string, encrypted: boolean): string | undefined {
  const headers: Record<string, string> = { host }
  addForwardedHeaders(headers, {
    socket: { remoteAddress: '10.0.0.9', encrypted },
    headers,
  } as unknown as IncomingMessage)
  return headers['x-forwarded-port']
}

t.test("X-Forwarded-Port is the Host's port as a URL parser reads it, an IPv6 literal's included", async (t) => {
  t.equal(forwardedPort('[::1]:8443', false), '8443', "the first ':digits' was ':1', inside the brackets")
  t.equal(forwardedPort('[::ffff:127.0.0.1]', true), '443')
  t.equal(forwardedPort('[2001:db8::1]', false), '80')
  t.equal(forwardedPort('shop.example:', false), '80', 'an empty port (RFC 3986 3.2.3)')
  t.equal(forwardedPort('shop.example:8080', true), '8080')
  // The oracle: WHATWG URL, which leaves the port out when it is the scheme's default.
  const host = fc.oneof(
    fc.domain(),
    fc.ipV4(),
    fc.ipV6().map((address) => `[${address}]`),
  )
  fc.assert(
    fc.property(host, fc.option(fc.nat({ max: 65535 })), fc.boolean(), (name, port, encrypted) => {
      const value = port === null ? name : `${name}:${port}`
      const scheme = encrypted ? 'https' : 'http'
      const expected = new URL(`${scheme}://${value}`).port || (encrypted ? '443' : '80')
      return forwardedPort(value, encrypted) === expected
    }),
    runs(),
  )
})

t.test("behind N trusted proxies the client is the one Express's `trust proxy = N` reads", async (t) => {
  const address = fc.oneof(fc.ipV4(), fc.ipV6())
  // Whatever the client itself sent: anything, empty entries and spaces included.
  const forged = fc.array(fc.oneof(address, fc.constantFrom('', ' ', 'unknown'), fc.string()), { maxLength: 4 })
  const separator = fc.constantFrom(',', ', ', ' , ')
  fc.assert(
    fc.property(
      forged,
      fc.array(address, { minLength: 1, maxLength: 4 }),
      separator,
      separator,
      (sent, appended, between, joiner) => {
        // Each trusted proxy appends one address; with fewer entries than hops, we log the peer (documented), proxy-addr the leftmost.
        const header =
          sent.length === 0 ? appended.join(joiner) : `${sent.join(between)}${joiner}${appended.join(joiner)}`
        const req = request(header)
        const hops = appended.length
        const expected = proxyAddr(req, (_, hop) => hop < hops)
        return clientAddress(req, hops) === expected && expected === appended[0]
      },
    ),
    runs(),
  )
})
