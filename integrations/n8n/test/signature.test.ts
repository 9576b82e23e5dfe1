// Tests run under Node's own runner and are not part of the package (only dist/ is).
/* eslint-disable @n8n/community-nodes/no-restricted-imports */
import assert from 'node:assert/strict';
import { test } from 'node:test';

import { secretKey, sign, verifySignature } from '../nodes/shared/signature';

// The Standard Webhooks test vector (the same one the Python `standardwebhooks` package,
// which Understudy signs with, produces).
const SECRET = 'whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw';
const ID = 'msg_p5jXN8AQM9LWM0D4loKWxJek';
const TS = 1614265330;
const BODY = '{"test": 2432232314}';
const SIGNATURE = 'v1,g0hM9SsE+OTPJTGt/tmIKtSyZlE3uFJELVlNIOLJ1OE=';

function headers(signature: string, timestamp: number | string = TS, id = ID) {
	return {
		'webhook-id': id,
		'webhook-timestamp': String(timestamp),
		'webhook-signature': signature,
	};
}

test('sign reproduces the Standard Webhooks vector', () => {
	assert.equal(sign(SECRET, ID, TS, BODY), SIGNATURE);
	assert.equal(sign(SECRET, ID, TS, Buffer.from(BODY)), SIGNATURE);
	// The secret without its prefix is the same key.
	assert.equal(sign(SECRET.slice('whsec_'.length), ID, TS, BODY), SIGNATURE);
	assert.equal(secretKey(SECRET).length, 24);
});

test('a good signature passes', () => {
	assert.deepEqual(
		verifySignature({
			secret: SECRET,
			headers: headers(SIGNATURE),
			body: Buffer.from(BODY),
			now: TS,
		}),
		{ ok: true },
	);
});

test('a signature over other bytes, another id or another secret fails', () => {
	const bad = [
		{ secret: SECRET, headers: headers(SIGNATURE), body: '{"test": 2432232315}' },
		// The same JSON serialized again (other spacing) is other bytes.
		{ secret: SECRET, headers: headers(SIGNATURE), body: '{"test":2432232314}' },
		{ secret: SECRET, headers: headers(SIGNATURE, TS, 'msg_other'), body: BODY },
		{
			secret: 'whsec_' + Buffer.from('another key of 24 bytes!').toString('base64'),
			headers: headers(SIGNATURE),
			body: BODY,
		},
		{ secret: SECRET, headers: headers('v1,' + Buffer.alloc(32).toString('base64')), body: BODY },
		{ secret: SECRET, headers: headers('v1,not base64 at all'), body: BODY },
		{ secret: SECRET, headers: headers('v1,'), body: BODY },
	];
	for (const options of bad) {
		const result = verifySignature({ ...options, now: TS });
		assert.equal(result.ok, false, JSON.stringify(options));
		if (!result.ok) assert.match(result.reason, /no webhook-signature matches/);
	}
});

test('a timestamp more than 5 minutes off fails, within passes', () => {
	const check = (now: number) =>
		verifySignature({ secret: SECRET, headers: headers(SIGNATURE), body: BODY, now });
	assert.equal(check(TS + 300).ok, true);
	assert.equal(check(TS - 300).ok, true);
	const late = check(TS + 301);
	assert.equal(late.ok, false);
	if (!late.ok) assert.match(late.reason, /301 s off/);
	assert.equal(check(TS - 301).ok, false, 'from the future');
	assert.equal(
		verifySignature({
			secret: SECRET,
			headers: headers(SIGNATURE),
			body: BODY,
			now: TS + 1000,
			toleranceSeconds: 1000,
		}).ok,
		true,
	);
});

test('the signature header may list several, one of them matching', () => {
	const other = 'v1,' + Buffer.alloc(32, 7).toString('base64');
	for (const list of [
		`${other} ${SIGNATURE}`,
		`${SIGNATURE} ${other}`,
		`v2,abc ${SIGNATURE}`,
		`v1a,${SIGNATURE.slice(3)} ${SIGNATURE}`,
	]) {
		assert.deepEqual(
			verifySignature({ secret: SECRET, headers: headers(list), body: BODY, now: TS }),
			{ ok: true },
			list,
		);
	}
	// Only other versions, or only wrong ones: refused.
	assert.equal(
		verifySignature({
			secret: SECRET,
			headers: headers(`v2,${SIGNATURE.slice(3)} ${other}`),
			body: BODY,
			now: TS,
		}).ok,
		false,
	);
});

test('missing or malformed headers fail; header names and arrays as Node gives them', () => {
	const none = verifySignature({ secret: SECRET, headers: {}, body: BODY, now: TS });
	assert.equal(none.ok, false);
	if (!none.ok) assert.match(none.reason, /missing/);
	const notNumber = verifySignature({
		secret: SECRET,
		headers: headers(SIGNATURE, '2021-02-25T15:02:10Z'),
		body: BODY,
		now: TS,
	});
	assert.equal(notNumber.ok, false);
	if (!notNumber.ok) assert.match(notNumber.reason, /not a number/);
	assert.equal(
		verifySignature({
			secret: SECRET,
			headers: {
				'Webhook-Id': ID,
				'WEBHOOK-TIMESTAMP': String(TS),
				'webhook-signature': [SIGNATURE],
			},
			body: BODY,
			now: TS,
		}).ok,
		true,
	);
});

test('a signature Understudy made for a real delivery verifies', () => {
	// A delivery as app/webhooks/service.py sends it: the secret it generated at creation,
	// the compact JSON it serialized, the signature its `standardwebhooks` Webhook made.
	const secret = 'whsec_C2FVsBQIhrscChlQIMV+b5sSYspob7oD';
	const body =
		'{"id":"dlv_1","eventId":"evt_1","type":"result.final","occurredAt":"2026-01-05T10:00:00.000Z","tenant":"t","runId":"run_1","fhirBase":"http://127.0.0.1:8000/api/testing/runs/run_1/fhir/r4","resource":{"resourceType":"DiagnosticReport","id":"r1","status":"final"}}';
	// Made by the Python `standardwebhooks` package: Webhook(secret).sign('dlv_1', at, body).
	const signature = 'v1,zh2kuMRjeMJ2W2aaL8EcbLe8YHcoDClbtMvfO2dVwCg=';
	assert.equal(sign(secret, 'dlv_1', 1767607200, body), signature);
	assert.equal(
		verifySignature({
			secret,
			headers: headers(signature, 1767607200, 'dlv_1'),
			body,
			now: 1767607201,
		}).ok,
		true,
	);
});
