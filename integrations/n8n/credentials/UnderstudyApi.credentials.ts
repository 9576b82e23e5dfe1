import type {
	IAuthenticateGeneric,
	Icon,
	ICredentialTestRequest,
	ICredentialType,
	INodeProperties,
} from 'n8n-workflow';

export class UnderstudyApi implements ICredentialType {
	name = 'understudyApi';

	displayName = 'Understudy API';

	documentationUrl = 'https://www.npmjs.com/package/n8n-nodes-understudy#credentials';

	icon: Icon = { light: 'file:../icons/understudy.svg', dark: 'file:../icons/understudy.dark.svg' };

	properties: INodeProperties[] = [
		{
			displayName: 'Base URL',
			name: 'baseUrl',
			type: 'string',
			default: 'http://127.0.0.1:8000',
			placeholder: 'http://127.0.0.1:8000',
			description:
				'Where Understudy answers, without a path (the FHIR base is <Base URL>/api/fhir/r4). The API key is sent only to this server.',
			required: true,
		},
		{
			displayName: 'API Key',
			name: 'apiKey',
			type: 'string',
			typeOptions: { password: true },
			default: '',
			placeholder: 'usk_…',
			description:
				"The tenant's key (./scripts/serve prints one), sent as Authorization: Bearer <key>",
			required: true,
		},
	];

	authenticate: IAuthenticateGeneric = {
		type: 'generic',
		properties: {
			headers: {
				Authorization: '=Bearer {{$credentials.apiKey}}',
			},
		},
	};

	// Listing the webhook subscriptions needs the key: a wrong one answers 401.
	test: ICredentialTestRequest = {
		request: {
			baseURL: '={{$credentials.baseUrl.replace(/\\/+$/, "")}}',
			url: '/api/webhooks',
			method: 'GET',
			headers: { Accept: 'application/json' },
		},
	};
}
