import { createRequire } from 'node:module'
import { Readable } from 'node:stream'
import { parse as parseContentType } from 'content-type'
import fc from 'fast-check'
import t from 'tap'
import {
  buildAcceptCheck,
  buildConnectionCheck,
  buildContentEncodingCheck,
  buildContentTypeCheck,
  buildTransferCodingCheck,
  buildJsonTypeCheck,
  connectionOptions,
} from '../../lib/checks/headers.js'
import { mediaTypes } from '../../lib/defaults.js'
import { runs } from '../helpers/fuzz.js'

const types = mediaTypes('example')
const contentType = buildContentTypeCheck(types)
const accept = buildAcceptCheck(types)
const encoding = buildContentEncodingCheck()
const connection = buildConnectionCheck()
const json = buildJsonTypeCheck()

t.test('the media types carry the vendor', async (t) => {
  t.strictSame(mediaTypes('acme'), {
    request: 'application/vnd.acme.payments-v6+json',
    response: 'application/vnd.acme.payments-v6.hal+json',
  })
})

t.test('Content-Type: absent is 400 headerIsMissing', async (t) => {
  t.match(contentType({}), { status: 400, body: { errorName: 'headerIsMissing', headerName: 'Content-Type' } })
  t.equal(
    contentType({})?.body.message,
    'The Content-Type header is missing. Send application/vnd.example.payments-v6+json.',
  )
})

t.test('Content-Type: the v6 type, case-insensitive, with parameters', async (t) => {
  for (const value of [
    'application/vnd.example.payments-v6+json',
    'Application/VND.Example.Payments-V6+JSON',
    'application/vnd.example.payments-v6+json; charset=utf-8',
    'application/vnd.example.payments-v6+json;charset="UTF-8"',
    'application/vnd.example.payments-v6+json; CHARSET=UTF-8',
    'application/vnd.example.payments-v6+json; Charset="utf-8"',
    'application/vnd.example.payments-v6+json ; version=6 ; charset=utf-8',
    'application/vnd.example.payments-v6+json; note="a \\"quoted\\" value"',
    'application/vnd.example.payments-v6+json; charset="utf\\-8"',
    'application/vnd.example.payments-v6+json;',
    '\tapplication/vnd.example.payments-v6+json ;; ;\tcharset=utf-8 ; ',
    ['application/vnd.example.payments-v6+json'],
  ]) {
    t.equal(contentType({ 'content-type': value }), undefined, String(value))
  }
})

t.test('Content-Type: anything else is 415 headerHasInvalidValue', async (t) => {
  for (const value of [
    '',
    'application/json',
    'application/vnd.other.payments-v6+json',
    'application/vnd.example.payments-v5+json',
    'application/vnd.example.payments-v6.hal+json',
    'application/vnd.example.payments-v6+json; charset=latin1',
    'application/vnd.example.payments-v6+json; charset=utf-7',
    'application/vnd.example.payments-v6+json; charset',
    'application/vnd.example.payments-v6+json, application/json',
    'application/vnd.example.payments-v6+json; x="unterminated',
    'application/vnd.example.payments-v6+json; x="ends in an escape\\',
    'application/vnd.example.payments-v6+json; x=',
    'application/vnd.example.payments-v6+json; x=1 y=2',
    'application/vnd.example.payments-v6+json x',
    '/vnd.example.payments-v6+json',
    'application/',
    'application',
  ]) {
    t.match(
      contentType({ 'content-type': value }),
      { status: 415, body: { errorName: 'headerHasInvalidValue', headerName: 'Content-Type' } },
      value,
    )
  }
  t.equal(
    contentType({ 'content-type': 'application/json' })?.body.message,
    'The Content-Type must be application/vnd.example.payments-v6+json (charset, if given, utf-8).',
  )
})

t.test('Content-Type: a parameter name in any letter case is that parameter (RFC 9110 5.6.6)', async (t) => {
  // Without the lower-casing of parameter names, each of these charsets would go unseen.
  for (const name of ['CHARSET', 'Charset', 'cHaRsEt', 'charseT']) {
    for (const charset of ['latin1', 'utf-7', '"ISO-8859-1"', 'utf-16']) {
      const value = `application/vnd.example.payments-v6+json; ${name}=${charset}`
      t.match(contentType({ 'content-type': value }), { status: 415, body: { headerName: 'Content-Type' } }, value)
    }
  }
})

t.test('a media type naming a parameter twice is malformed (RFC 6838 4.3), whatever the values', async (t) => {
  for (const parameters of [
    'charset=utf-7; charset=utf-8',
    'charset=utf-8; CHARSET=utf-7',
    'charset=utf-8; charset=utf-8',
    'version=6; Version=6',
  ]) {
    const value = `application/vnd.example.payments-v6+json; ${parameters}`
    t.match(contentType({ 'content-type': value }), { status: 415 }, value)
  }
  t.match(accept({ accept: `${types.response};q=0;q=1` }), { status: 406 }, 'a range with q twice is ignored')
  t.equal(accept({ accept: `${types.response};q=0;q=1, */*;q=0.5` }), undefined, 'and the next range decides')
})

t.test('a JSON type: application/json or a +json type (RFC 6839), its charset UTF-8 when named', async (t) => {
  for (const value of [
    'application/json',
    'APPLICATION/JSON',
    'application/json; charset=utf-8',
    'application/json;CHARSET="UTF-8"',
    'application/json; version=2',
    'application/merchant+json',
    'application/problem+json; charset=UTF-8',
    'application/vnd.example.payments-v6+json',
    'application/vnd.example.payments-v5+json',
    ['application/json', 'text/plain'],
  ]) {
    t.equal(json({ 'content-type': value }), true, String(value))
  }
  for (const value of [
    undefined,
    '',
    'text/json',
    'text/x-json',
    'application/jsonp',
    'application/json-seq',
    'application/+json',
    'application/x-json',
    'application/merchant+json+xml',
    'multipart/related+json',
    'application/json; charset=latin1',
    'application/json; charset=utf-16',
    'application/json; charset=utf8',
    'application/json; charset=utf-7; charset=utf-8',
    'application/json; charset=utf-8; charset=utf-8',
    'application/json; charset',
    'application/x-www-form-urlencoded',
    'multipart/form-data; boundary=x',
    'text/plain',
  ]) {
    t.equal(json({ 'content-type': value }), false, String(value))
  }
})

t.test('Content-Encoding: absent or identity is fine; any coding is 415 headerHasInvalidValue', async (t) => {
  for (const value of [undefined, 'identity', ' IDENTITY ', '', ' '])
    t.equal(encoding({ 'content-encoding': value }), undefined)
  for (const value of ['gzip', 'deflate', 'br', 'zstd', 'x-gzip', 'identity, gzip', 'gzip, identity', 'identity;q=1']) {
    t.match(
      encoding({ 'content-encoding': value }),
      { status: 415, body: { errorName: 'headerHasInvalidValue', headerName: 'Content-Encoding' } },
      value,
    )
  }
  t.match(encoding({ 'content-encoding': ['identity', 'gzip'] }), { status: 415 }, 'repeated, as a list')
  t.equal(
    encoding({ 'content-encoding': 'gzip' })?.body.message,
    'The request body must not be encoded: send it without a Content-Encoding.',
  )
})

t.test('Transfer-Encoding: absent or chunked alone is fine; any other coding before it is 415', async (t) => {
  const transfer = buildTransferCodingCheck()
  for (const value of [undefined, 'chunked', ' Chunked '])
    t.equal(transfer({ 'transfer-encoding': value }), undefined, String(value))
  for (const value of [
    'gzip, chunked',
    'identity, chunked',
    'chunked, chunked',
    'x-gzip,chunked',
    ['gzip', 'chunked'],
  ]) {
    t.match(
      transfer({ 'transfer-encoding': value }),
      {
        status: 415,
        body: {
          errorName: 'headerHasInvalidValue',
          headerName: 'Transfer-Encoding',
          message: 'The request body must have no transfer coding but chunked.',
        },
      },
      String(value),
    )
  }
})

t.test('a type not followed by its slash, or a parameter without its =, is no media type', async (t) => {
  for (const value of ['application json', 'application;json', 'application/json; charset utf-8'])
    t.equal(json({ 'content-type': value }), false, value)
  t.equal(json({ 'content-type': 'application/json; charset=utf-8' }), true)
})

t.test('connectionOptions: the names Connection lists, lower-cased; none for keep-alive or close', async (t) => {
  t.equal(connectionOptions(undefined), undefined)
  t.equal(connectionOptions('keep-alive'), undefined)
  t.equal(connectionOptions('Keep-Alive'), undefined)
  t.equal(connectionOptions('close'), undefined)
  t.same([...(connectionOptions('keep-alive, X-Hop ,TE') as Set<string>)], ['keep-alive', 'x-hop', 'te'])
  t.same([...(connectionOptions(['close', 'Upgrade']) as Set<string>)], ['close', 'upgrade'], 'repeated, as a list')
})

t.test('Connection naming a header the checks read is 400 headerHasInvalidValue (RFC 9110 7.6.1)', async (t) => {
  for (const value of [undefined, 'keep-alive', 'close', 'Upgrade, HTTP2-Settings', 'TE', 'x-hop, keep-alive']) {
    t.equal(connection({ connection: value }), undefined, String(value))
  }
  for (const value of [
    'authorization',
    'Content-Type',
    'keep-alive, accept',
    'close,content-length',
    ' Content-Encoding ',
    'content-type, accept, authorization',
  ]) {
    t.match(
      connection({ connection: value }),
      { status: 400, body: { errorName: 'headerHasInvalidValue', headerName: 'Connection' } },
      value,
    )
  }
  t.match(connection({ connection: ['keep-alive', 'Authorization'] }), { status: 400 }, 'repeated, as a list')
  t.equal(
    connection({ connection: 'authorization' })?.body.message,
    'The Connection header must not name Authorization, Content-Type, Content-Encoding, Accept or Content-Length: a proxy removes the headers it names.',
  )
})

t.test('a media type with thousands of empty parameters is read in one pass (RFC 9110 5.6.6)', async (t) => {
  // A backtracking pattern took exponential time on these; the scanner reads each character once.
  const empties = '; '.repeat(6000)
  t.equal(contentType({ 'content-type': `${types.request}${empties}` }), undefined)
  t.match(contentType({ 'content-type': `${types.request}${empties}x` }), { status: 415 })
  t.match(accept({ accept: `${types.response}${empties}x` }), { status: 406 })
  t.equal(accept({ accept: `${types.response}${empties}q=1` }), undefined)
})

t.test('Accept: absent, empty or admitting the HAL type is fine', async (t) => {
  for (const value of [
    undefined,
    '',
    ' ',
    '*/*',
    'application/vnd.example.payments-v6.hal+json',
    'APPLICATION/VND.EXAMPLE.PAYMENTS-V6.HAL+JSON',
    'application/*',
    'application/json, */*;q=0.1',
    'text/html;q=0.9, application/vnd.example.payments-v6.hal+json;q=0.5',
    'application/vnd.example.payments-v6.hal+json;q=1.000',
    'application/vnd.example.payments-v6.hal+json;q=0.001',
    'garbage, */*',
    ['application/json', '*/*'],
  ]) {
    t.equal(accept({ accept: value }), undefined, String(value))
  }
})

t.test('Accept: nothing admitting the HAL type with q > 0 is 406', async (t) => {
  for (const value of [
    'application/json',
    'text/*',
    'application/vnd.example.payments-v6+json',
    'application/vnd.example.payments-v6.hal+json;q=0',
    'application/vnd.example.payments-v6.hal+json;q=0.000',
    '*/*;q=0',
    'application/vnd.example.payments-v6.hal+json;q=0, */*',
    'application/vnd.example.payments-v6.hal+json;q=0, application/*;q=1',
    'application/*;q=0, */*;q=1',
    'application/vnd.example.payments-v6.hal+json;q=2',
    'application/vnd.example.payments-v6.hal+json;q=abc',
    '*/json',
    'garbage',
  ]) {
    t.match(
      accept({ accept: value }),
      { status: 406, body: { errorName: 'headerHasInvalidValue', headerName: 'Accept' } },
      value,
    )
  }
  t.equal(
    accept({ accept: 'application/json' })?.body.message,
    'The Accept header must admit application/vnd.example.payments-v6.hal+json.',
  )
})

t.test('Accept: a comma inside a quoted string splits no range (RFC 9110 5.6.1, 5.6.4)', async (t) => {
  t.not(
    accept({ accept: 'text/plain;p="x, application/vnd.example.payments-v6.hal+json, y", */*;q=0' }),
    undefined,
    'no range of this list names the HAL type',
  )
  t.equal(accept({ accept: 'application/vnd.example.payments-v6.hal+json;p="a,b"' }), undefined)
  t.not(accept({ accept: 'text/plain;p="x, application/vnd.example.payments-v6.hal+json' }), undefined, 'never closed')
  t.equal(
    accept({ accept: 'text/plain;p="x",application/vnd.example.payments-v6.hal+json' }),
    undefined,
    'a comma right after the closing quote splits',
  )
})

t.test('Accept: a q that is not a qvalue (RFC 9110 section 12.4.2) ignores its range', async (t) => {
  for (const q of ['1.5', '20', '0.1234', '-1', '.5']) {
    t.not(accept({ accept: `application/vnd.example.payments-v6.hal+json;q=${q}` }), undefined, `q=${q}`)
  }
  t.equal(accept({ accept: 'application/vnd.example.payments-v6.hal+json;q=0.001' }), undefined)
  t.equal(accept({ accept: 'application/vnd.example.payments-v6.hal+json;q=1.000' }), undefined)
})

t.test('Accept: the most specific range decides, equal ranges take the best q', async (t) => {
  t.equal(accept({ accept: '*/*;q=0, application/vnd.example.payments-v6.hal+json;q=0.2' }), undefined)
  t.equal(
    accept({
      accept: 'application/vnd.example.payments-v6.hal+json;q=0, application/vnd.example.payments-v6.hal+json;q=0.3',
    }),
    undefined,
  )
  t.equal(
    accept({
      accept: 'application/vnd.example.payments-v6.hal+json;q=0.3, application/vnd.example.payments-v6.hal+json;q=0',
    }),
    undefined,
    'the best, not the last',
  )
  t.not(
    accept({ accept: '*/*;q=0.5, application/vnd.example.payments-v6.hal+json;q=0' }),
    undefined,
    'a more specific range later overrides a better q',
  )
  t.not(accept({ accept: 'application/*;q=0.5, application/vnd.example.payments-v6.hal+json;q=0' }), undefined)
})

/** RFC 9110 5.6.2 `tchar`. */
const TCHARS = "!#$%&'*+-.^_`|~0123456789ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz"
const anyToken = fc.string({ unit: fc.constantFrom(...TCHARS), minLength: 1, maxLength: 6 })
/** RFC 9110 5.6.3 OWS. */
const ows = fc.constantFrom('', '', ' ', '\t', '  ')
/** RFC 9110 5.6.4: `quoted-string`, with separators, obs-text and quoted pairs inside. */
const quotedString = fc
  .array(
    fc.oneof(
      fc.constantFrom(' ', '\t', ',', ';', '=', '/', 'a', '\\"', '\\\\', '\\a', '\\,'),
      fc.integer({ min: 0x21, max: 0xff }).filter((code) => code !== 0x22 && code !== 0x5c && code !== 0x7f),
    ),
    { maxLength: 6 },
  )
  .map((parts) => `"${parts.map((part) => (typeof part === 'number' ? String.fromCharCode(part) : part)).join('')}"`)
const CHARSETS = ['utf-8', 'UTF-8', '"utf-8"', '"Utf-8"', 'utf8', 'latin1', 'utf-7', '"utf-7"']

/** `*( OWS ";" OWS [ parameter ] )` (RFC 9110 5.6.6) of [name, value] pairs, with empty parameters among them. */
function parametersOf(pairs: fc.Arbitrary<[string, string]>): fc.Arbitrary<string> {
  const parameter = fc.tuple(ows, ows, fc.option(pairs, { freq: 6 }))
  // A name given twice is refused by choice (RFC 6838 4.3, docs/checks.md), where readers take the first or the last.
  return fc
    .uniqueArray(parameter, { maxLength: 4, selector: ([, , pair]) => pair?.[0].toLowerCase() ?? Symbol('none') })
    .map((list) =>
      list.map(([before, after, pair]) => `${before};${after}${pair === null ? '' : pair.join('=')}`).join(''),
    )
}

const contentTypeValue = fc
  .tuple(
    ows,
    fc.oneof(fc.mixedCase(fc.constant('application')), anyToken),
    fc.oneof(
      fc.mixedCase(fc.constantFrom('vnd.example.payments-v6+json', 'json', 'merchant+json')),
      fc.constant('+json'),
      anyToken,
    ),
    parametersOf(
      fc.oneof(
        fc.tuple(fc.mixedCase(fc.constant('charset')), fc.constantFrom(...CHARSETS)),
        fc.tuple(anyToken, fc.oneof(anyToken, quotedString)),
      ),
    ),
    ows,
  )
  .map(([before, type, subtype, parameters, after]) => `${before}${type}/${subtype}${parameters}${after}`)

t.test('Content-Type read as the content-type package (body-parser, Express) reads it', async (t) => {
  fc.assert(
    fc.property(contentTypeValue, (value) => {
      const { type, parameters } = parseContentType(value)
      const utf8 = parameters.charset === undefined || parameters.charset.toLowerCase() === 'utf-8'
      const v6 = type === types.request && utf8
      const jsonType =
        type === 'application/json' || (type.startsWith('application/') && type.endsWith('+json') && type.length > 17)
      return (
        (contentType({ 'content-type': value }) === undefined) === v6 &&
        json({ 'content-type': value }) === (jsonType && utf8)
      )
    }),
    runs(),
  )
})

t.test(
  'a Content-Type passed, however malformed around it, is the v6 type in UTF-8 to the content-type package',
  async (t) => {
    const insertion = fc.tuple(fc.nat(), fc.constantFrom('"', '\\', ';', ',', '=', ' ', '/', 'x'))
    fc.assert(
      fc.property(contentTypeValue, fc.array(insertion, { minLength: 1, maxLength: 3 }), (valid, insertions) => {
        let value = valid
        for (const [at, char] of insertions)
          value = value.slice(0, at % (value.length + 1)) + char + value.slice(at % (value.length + 1))
        if (contentType({ 'content-type': value }) !== undefined) return true
        const { type, parameters } = parseContentType(value)
        return (
          type === types.request && (parameters.charset === undefined || parameters.charset.toLowerCase() === 'utf-8')
        )
      }),
      runs(),
    )
  },
)

/** negotiator, what Express's `req.accepts()` and `res.format()` read `Accept` with. */
const Negotiator = createRequire(import.meta.url)('negotiator') as new (request: {
  headers: Record<string, string>
}) => { mediaTypes: (available: string[]) => string[] }

t.test('Accept read as negotiator (Express) reads it', async (t) => {
  const qvalue = fc.constantFrom('0', '0.0', '0.000', '0.001', '0.5', '1', '1.0', '1.000')
  const range = fc.tuple(
    fc.oneof(
      fc.mixedCase(fc.constantFrom('application/vnd.example.payments-v6.hal+json', 'application/*')),
      fc.constantFrom('*/*', 'application/json', 'text/*', 'application/vnd.example.payments-v6+json'),
    ),
    fc.option(fc.tuple(ows, ows, fc.mixedCase(fc.constant('q')), qvalue)),
    parametersOf(
      fc.tuple(
        anyToken.filter((name) => name.toLowerCase() !== 'q'),
        fc.oneof(anyToken, quotedString),
      ),
    ),
  )
  const list = fc.array(fc.tuple(ows, fc.option(range, { freq: 6 }), ows), { minLength: 1, maxLength: 4 })
  fc.assert(
    fc.property(list, (elements) => {
      const render = (withParameters: boolean) =>
        elements
          .map(([before, element, after]) => {
            if (element === null) return `${before}${after}`
            const [type, q, parameters] = element
            const weight = q === null ? '' : `${q[0]};${q[1]}${q[2]}=${q[3]}`
            return `${before}${type}${withParameters ? parameters : ''}${weight}${after}`
          })
          .join(',')
      const value = render(true)
      // Parameters other than q are not compared by choice (docs/checks.md, check 4); negotiator requires them to match.
      const admitted = new Negotiator({ headers: { accept: render(false) } }).mediaTypes([types.response]).length > 0
      return value.trim() === '' || (accept({ accept: value }) === undefined) === admitted
    }),
    runs(),
  )
})

/** body-parser's JSON reader, what `express.json()` runs. */
const bodyParser = createRequire(import.meta.url)('body-parser') as {
  json: (options: object) => (req: Readable, res: object, next: (error?: unknown) => void) => void
}

t.test('a Content-Encoding passed is one express.json() reads the bytes as they came under', async (t) => {
  const readJson = bodyParser.json({ type: () => true })
  const body = Buffer.from('{"a":1}')
  const coding = fc.constantFrom('identity', 'IDENTITY', 'Identity', 'gzip', 'deflate', 'br', 'x-gzip', '')
  const value = fc.array(fc.tuple(coding, fc.constantFrom(',', ', ', ' ,')), { maxLength: 3 }).map((list) =>
    list
      .map(([name, comma], at) => (at === 0 ? name : comma + name))
      .join('')
      .trim(),
  )
  await fc.assert(
    fc.asyncProperty(value, async (header) => {
      const req = Object.assign(Readable.from([body]), {
        headers: { 'content-type': 'application/json', 'content-length': '7', 'content-encoding': header },
      })
      // A plain body: a reader that decodes it fails, so only one that reads the bytes as they came succeeds.
      const asCame = await new Promise<boolean>((resolve) => readJson(req, {}, (error) => resolve(error === undefined)))
      return (encoding({ 'content-encoding': header }) === undefined) === asCame
    }),
    runs(),
  )
})
