package fargate

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"slices"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/ecs"
	"github.com/aws/aws-sdk-go-v2/service/ecs/types"

	"github.com/remote-agents/remote-agents/shared/launch"
)

// A sandbox of an agent type with a base_image runs that image, with the
// agent mounted into it from the platform's: a task definition per image,
// registered the first time a launch needs it and reused after, made from
// the sandbox task definition (Options.TaskDefinition, its roles, size,
// logs and environment) with
//   - a first container, InstallContainer, of the platform's image, which
//     copies the agent binary and the platform's CA certificates into a
//     task volume and exits;
//   - the agent container running the base image, the volume mounted
//     read-only at AgentDir, the agent as its entry point, started once the
//     first one succeeded, in /workspace, its tools run as ToolUserID.
//
// The image must be a Linux image of the task's architecture; the agent is
// static, so it needs nothing of it, but its tools want bash and git.
const (
	// InstallContainer copies the agent into the task volume.
	InstallContainer = "ra-agent-install"
	// AgentDir is where the base image's container finds the agent.
	AgentDir = "/ra-agent"
	// ToolUserID is the user a base image's tools run as: a numeric id, as
	// the image knows no "agent" user (toolenv.LookupUser takes an id the
	// image does not list).
	ToolUserID  = "10001"
	agentVolume = "ra-agent"
)

// ImageFamily is the task definition family of base image in the sandbox
// family: the same for the same image, whichever worker registers it.
func ImageFamily(family, image string) string {
	sum := sha256.Sum256([]byte(image))
	return family + launch.ImageFamilyInfix + hex.EncodeToString(sum[:6])
}

// taskDefinition returns the task definition a sandbox of image runs: the
// sandbox's own for none; else the image's, from the cache, from ECS (a
// definition of its family that another launcher registered from the same
// platform image), or registered now.
func (l *Launcher) taskDefinition(ctx context.Context, image string) (string, error) {
	if image == "" {
		return l.o.TaskDefinition, nil
	}
	l.mu.Lock()
	arn, ok := l.images[image]
	l.mu.Unlock()
	if ok {
		return arn, nil
	}
	base, err := l.api.DescribeTaskDefinition(ctx, &ecs.DescribeTaskDefinitionInput{TaskDefinition: &l.o.TaskDefinition})
	if err != nil || base.TaskDefinition == nil {
		return "", fmt.Errorf("describe the sandbox task definition for base image %s: %w", image, err)
	}
	in, err := imageTaskDefinition(*base.TaskDefinition, l.o.Container, image)
	if err != nil {
		return "", err
	}
	if cur, err := l.api.DescribeTaskDefinition(ctx, &ecs.DescribeTaskDefinitionInput{TaskDefinition: in.Family}); err == nil &&
		cur.TaskDefinition != nil && sameImages(cur.TaskDefinition.ContainerDefinitions, in.ContainerDefinitions) {
		arn = aws.ToString(cur.TaskDefinition.TaskDefinitionArn)
	} else {
		out, err := l.api.RegisterTaskDefinition(ctx, in)
		if err != nil || out.TaskDefinition == nil {
			return "", fmt.Errorf("register the task definition of base image %s: %w", image, err)
		}
		arn = aws.ToString(out.TaskDefinition.TaskDefinitionArn)
	}
	l.mu.Lock()
	l.images[image] = arn
	l.mu.Unlock()
	return arn, nil
}

// sameImages reports whether two task definitions' containers run the same
// images under the same names: a definition registered from an older
// platform image is registered again.
func sameImages(a, b []types.ContainerDefinition) bool {
	images := func(cs []types.ContainerDefinition) []string {
		var out []string
		for _, c := range cs {
			out = append(out, aws.ToString(c.Name)+"="+aws.ToString(c.Image))
		}
		slices.Sort(out)
		return out
	}
	return slices.Equal(images(a), images(b))
}

// imageTaskDefinition is base (the sandbox task definition, whose agent
// container is named container) made to run image.
func imageTaskDefinition(base types.TaskDefinition, container, image string) (*ecs.RegisterTaskDefinitionInput, error) {
	i := slices.IndexFunc(base.ContainerDefinitions, func(c types.ContainerDefinition) bool { return aws.ToString(c.Name) == container })
	if i < 0 {
		return nil, fmt.Errorf("the sandbox task definition has no container %s", container)
	}
	agent := base.ContainerDefinitions[i]
	mount := types.MountPoint{SourceVolume: aws.String(agentVolume), ContainerPath: aws.String(AgentDir)}
	install := types.ContainerDefinition{
		Name:      aws.String(InstallContainer),
		Image:     agent.Image,
		Essential: aws.Bool(false),
		User:      aws.String("0"),
		// The platform's image: the agent, and the certificates it trusts
		// (the base image may have none).
		EntryPoint:       []string{"/bin/sh", "-c"},
		Command:          []string{"cp /usr/local/bin/agent /etc/ssl/certs/ca-certificates.crt " + AgentDir + "/"},
		MountPoints:      []types.MountPoint{mount},
		LogConfiguration: agent.LogConfiguration,
	}
	agent.Image = aws.String(image)
	agent.EntryPoint = []string{AgentDir + "/agent"}
	agent.Command = []string{"sandbox"}
	agent.WorkingDirectory = aws.String("/workspace")
	ro := mount
	ro.ReadOnly = aws.Bool(true)
	agent.MountPoints = append(slices.Clone(agent.MountPoints), ro)
	agent.DependsOn = append(slices.Clone(agent.DependsOn), types.ContainerDependency{ContainerName: aws.String(InstallContainer), Condition: types.ContainerConditionSuccess})
	env := slices.DeleteFunc(slices.Clone(agent.Environment), func(kv types.KeyValuePair) bool {
		switch aws.ToString(kv.Name) {
		case "RA_TOOL_USER", "SSL_CERT_FILE", "RA_WORKSPACE":
			return true
		}
		return false
	})
	agent.Environment = append(env,
		types.KeyValuePair{Name: aws.String("RA_TOOL_USER"), Value: aws.String(ToolUserID)},
		types.KeyValuePair{Name: aws.String("SSL_CERT_FILE"), Value: aws.String(AgentDir + "/ca-certificates.crt")},
		types.KeyValuePair{Name: aws.String("RA_WORKSPACE"), Value: aws.String("/workspace")})
	containers := slices.Clone(base.ContainerDefinitions)
	containers[i] = agent
	return &ecs.RegisterTaskDefinitionInput{
		Family:                  aws.String(ImageFamily(aws.ToString(base.Family), image)),
		ContainerDefinitions:    append([]types.ContainerDefinition{install}, containers...),
		Cpu:                     base.Cpu,
		Memory:                  base.Memory,
		ExecutionRoleArn:        base.ExecutionRoleArn,
		TaskRoleArn:             base.TaskRoleArn,
		NetworkMode:             base.NetworkMode,
		RequiresCompatibilities: base.RequiresCompatibilities,
		RuntimePlatform:         base.RuntimePlatform,
		EphemeralStorage:        base.EphemeralStorage,
		PidMode:                 base.PidMode,
		IpcMode:                 base.IpcMode,
		Volumes:                 append(slices.Clone(base.Volumes), types.Volume{Name: aws.String(agentVolume)}),
	}, nil
}
