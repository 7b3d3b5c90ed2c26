//go:build !pedigree_nokms_aws

package registry

// The AWS KMS provider: keys named awskms:///ALIAS-OR-ARN (leave the
// endpoint out of the URI: it forces https; set $AWS_ENDPOINT_URL_KMS for
// another endpoint), credentials and region as the AWS SDK finds them. Built
// in by default; build with -tags pedigree_nokms_aws to leave it out. See
// docs/keys.md for the measured size.
import _ "github.com/sigstore/sigstore/pkg/signature/kms/aws"
