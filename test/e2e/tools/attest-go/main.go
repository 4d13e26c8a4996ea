// attest-go: a judge of tpmkey attestations that we did not write, in Go:
// go-webauthn's registration verification (fmt "tpm"), and Go's
// crypto/x509 for the AK certificate and its chain to the CA root, as the
// fleet tools written in Go (go-attestation, step-ca) parse them.
//
// usage: attest-go ATTESTATION ROOT.pem CHALLENGE
//
//	attest-go parse CERT.pem...   (crypto/x509 parses each certificate; prints
//	                              the first's permanentIdentifiers as step-ca reads them)
//	attest-go acme-device-attest ...  (acme.go: step-ca judges it over ACME)
//	attest-go step-ca-reference ...   (acme.go: what step-ca accepts)
//
// Exit 0 and "ok: ..." lines when accepted; 1 and the refusal otherwise.
package main

import (
	"bufio"
	"crypto/x509"
	"encoding/base64"
	"encoding/json"
	"encoding/pem"
	"errors"
	"fmt"
	"os"
	"runtime/debug"
	"strings"
	"time"

	"github.com/go-webauthn/webauthn/protocol"
	"github.com/go-webauthn/webauthn/protocol/webauthncose"
)

// readAttestation reads the `attestation` exchange file: "tpmkey-attestation 1",
// then NAME VALUE lines (docs/attestation.md, "The files").
func readAttestation(path string) (object, clientData []byte, err error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, nil, err
	}
	defer f.Close()
	s := bufio.NewScanner(f)
	s.Buffer(make([]byte, 1<<20), 1<<20)
	if !s.Scan() || s.Text() != "tpmkey-attestation 1" {
		return nil, nil, fmt.Errorf("%s: not an attestation file", path)
	}
	fields := map[string]string{}
	for s.Scan() {
		name, value, ok := strings.Cut(s.Text(), " ")
		if !ok {
			return nil, nil, fmt.Errorf("%s: a line without a value", path)
		}
		fields[name] = value
	}
	if object, err = base64.StdEncoding.DecodeString(fields["attestation-object"]); err != nil {
		return nil, nil, fmt.Errorf("attestation-object: %w", err)
	}
	if clientData, err = base64.StdEncoding.DecodeString(fields["client-data-json"]); err != nil {
		return nil, nil, fmt.Errorf("client-data-json: %w", err)
	}
	return object, clientData, nil
}

func pemCertificates(path string) ([]*x509.Certificate, error) {
	data, err := os.ReadFile(path)
	if err != nil {
		return nil, err
	}
	var certs []*x509.Certificate
	for {
		var block *pem.Block
		block, data = pem.Decode(data)
		if block == nil {
			break
		}
		cert, err := x509.ParseCertificate(block.Bytes)
		if err != nil {
			return nil, fmt.Errorf("%s: crypto/x509: %w", path, err)
		}
		certs = append(certs, cert)
	}
	if len(certs) == 0 {
		return nil, fmt.Errorf("%s: no PEM certificate", path)
	}
	return certs, nil
}

func webauthnVersion() string {
	if info, ok := debug.ReadBuildInfo(); ok {
		for _, dep := range info.Deps {
			if dep.Path == "github.com/go-webauthn/webauthn" {
				return dep.Version
			}
		}
	}
	return "?"
}

func verify(attPath, rootPath, challengePath string) error {
	object, clientData, err := readAttestation(attPath)
	if err != nil {
		return err
	}
	challenge, err := os.ReadFile(challengePath)
	if err != nil {
		return err
	}
	roots, err := pemCertificates(rootPath)
	if err != nil {
		return err
	}
	// The credential ID is the key's TPM name, from authData.
	var ao protocol.AttestationObject
	if err = ao.UnmarshalCBOR(object); err != nil {
		return fmt.Errorf("the attestation object: %w", err)
	}
	var authData protocol.AuthenticatorData
	if err = authData.Unmarshal(ao.RawAuthData); err != nil {
		return describe("authData", err)
	}
	id := base64.RawURLEncoding.EncodeToString(authData.AttData.CredentialID)
	response, err := json.Marshal(map[string]any{
		"id": id, "rawId": id, "type": "public-key",
		"response": map[string]string{
			"clientDataJSON":    base64.RawURLEncoding.EncodeToString(clientData),
			"attestationObject": base64.RawURLEncoding.EncodeToString(object),
		},
	})
	if err != nil {
		return err
	}
	parsed, err := protocol.ParseCredentialCreationResponseBytes(response)
	if err != nil {
		return describe("parsing", err)
	}
	params := []protocol.CredentialParameter{}
	for _, alg := range []webauthncose.COSEAlgorithmIdentifier{webauthncose.AlgES256, webauthncose.AlgES384,
		webauthncose.AlgES512, webauthncose.AlgRS256} {
		params = append(params, protocol.CredentialParameter{Type: protocol.PublicKeyCredentialType, Algorithm: alg})
	}
	if _, err = parsed.Verify(base64.RawURLEncoding.EncodeToString(challenge), "tpmkey", []string{"tpmkey:"}, nil,
		nil, protocol.TopOriginExplicitVerificationMode, false, false, true, nil, params,
		protocol.AttestationPolicy{}, protocol.SignaturePolicy{}); err != nil {
		return describe("verifying", err)
	}
	if parsed.Response.AttestationObject.Format != "tpm" {
		return fmt.Errorf("the format is %q, not tpm", parsed.Response.AttestationObject.Format)
	}
	// go-webauthn leaves the trust anchors to its caller (without a
	// metadata service): the x5c chain to ROOT, by crypto/x509.
	x5c, _ := parsed.Response.AttestationObject.AttStatement["x5c"].([]any)
	if len(x5c) == 0 {
		return errors.New("no x5c")
	}
	var chain []*x509.Certificate
	for i, raw := range x5c {
		der, _ := raw.([]byte)
		cert, err := x509.ParseCertificate(der)
		if err != nil {
			return fmt.Errorf("x5c[%d]: crypto/x509: %w", i, err)
		}
		chain = append(chain, cert)
	}
	opts := x509.VerifyOptions{Roots: x509.NewCertPool(), Intermediates: x509.NewCertPool(),
		CurrentTime: time.Now(), KeyUsages: []x509.ExtKeyUsage{x509.ExtKeyUsageAny}}
	for _, root := range roots {
		opts.Roots.AddCert(root)
	}
	for _, cert := range chain[1:] {
		opts.Intermediates.AddCert(cert)
	}
	// The AK certificate's subjectAltName is critical and holds only a
	// directoryName, which crypto/x509 does not handle: WebAuthn 8.3.1 asks
	// for exactly that, and go-webauthn checked its TPM attributes above.
	leaf := *chain[0]
	leaf.UnhandledCriticalExtensions = nil
	for _, ext := range chain[0].UnhandledCriticalExtensions {
		if !ext.Equal([]int{2, 5, 29, 17}) {
			leaf.UnhandledCriticalExtensions = append(leaf.UnhandledCriticalExtensions, ext)
		}
	}
	if _, err = leaf.Verify(opts); err != nil {
		return fmt.Errorf("the AK certificate's chain to %s: crypto/x509: %w", rootPath, err)
	}
	return nil
}

// describe gives go-webauthn's error with its details (its Error() is
// only the type).
func describe(what string, err error) error {
	var e *protocol.Error
	if errors.As(err, &e) {
		return fmt.Errorf("%s: %s: %s (%s)", what, e.Type, e.Details, e.DevInfo)
	}
	return fmt.Errorf("%s: %w", what, err)
}

func main() {
	if len(os.Args) >= 2 && os.Args[1] == "acme-device-attest" {
		if err := acmeDeviceAttest(os.Args[2:]); err != nil {
			fmt.Println("acme-device-attest:", err)
			os.Exit(1)
		}
		return
	}
	if len(os.Args) >= 2 && os.Args[1] == "step-ca-reference" {
		if err := stepCAReference(os.Args[2:]); err != nil {
			fmt.Println("step-ca-reference:", err)
			os.Exit(1)
		}
		return
	}
	if len(os.Args) >= 3 && os.Args[1] == "parse" {
		for _, path := range os.Args[2:] {
			certs, err := pemCertificates(path)
			if err != nil {
				fmt.Println("crypto/x509: refused:", err)
				os.Exit(1)
			}
			fmt.Printf("ok: crypto/x509 parses %s (%d certificate(s), %d extension(s) in the first)\n", path,
				len(certs), len(certs[0].Extensions))
			ids, err := permanentIdentifiers(certs[0])
			if err != nil {
				fmt.Println("permanentIdentifier: refused:", err)
				os.Exit(1)
			}
			for _, id := range ids {
				fmt.Printf("permanentIdentifier: %s\n", id)
			}
		}
		return
	}
	if len(os.Args) != 4 {
		fmt.Fprintln(os.Stderr, "usage: attest-go ATTESTATION ROOT.pem CHALLENGE | attest-go parse CERT.pem...")
		os.Exit(2)
	}
	if err := verify(os.Args[1], os.Args[2], os.Args[3]); err != nil {
		fmt.Printf("go-webauthn %s: refused: %v\n", webauthnVersion(), err)
		os.Exit(1)
	}
	fmt.Printf("ok: go-webauthn %s accepts the attestation (fmt tpm), and crypto/x509 its chain to %s\n",
		webauthnVersion(), os.Args[2])
}
